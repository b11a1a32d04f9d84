-- Coalesced requests: ARGV[2] holds the costs of k requests, separated by
-- spaces, each decided in turn at the same `now` by the step that follows
-- (the algorithm's `*_step.lua`, the very text of its single check) on the
-- state the one before it left, exactly as k calls one after another
-- would be; the state is written once, after the last (Redis's clock
-- stands still while a script runs, so the one PEXPIRE sets the very
-- expiry the last allowed request's would). Reply: the k replies one
-- after the other.
local replies, at, wrote = {}, 0, false
for text in string.gmatch(ARGV[2], '%d+') do
  local cost = tonumber(text)
