-- Coalesced requests: ARGV[2] holds the costs of k requests in runs,
-- `{cost}x{times}` separated by spaces (`1x32`: 32 requests costing 1),
-- each request decided in turn at the same `now` by the step that follows
-- (the algorithm's `*_step.lua`, the very text of its single check) on the
-- state the one before it left, exactly as k calls one after another
-- would be; the state is written once, after the last (Redis's clock
-- stands still while a script runs, so the one PEXPIRE sets the very
-- expiry the last allowed request's would).
--
-- Reply: `now`, the state as read, the state as written (`state()`, the
-- algorithm's fields, -1 for none): a few integers however large the
-- batch. The client replays the batch on the state as read with the
-- algorithm's own code, which answers each request as this step would
-- (the conformance suite holds the two equal), and checks that it comes
-- to the state written.
local read_state, wrote = state(), false
for cost_text, times in string.gmatch(ARGV[2], '(%d+)x(%d+)') do
  local cost = tonumber(cost_text)
  for _ = 1, tonumber(times) do
