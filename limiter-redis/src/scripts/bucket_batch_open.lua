-- Coalesced requests on the meter (`meter.lua`): ARGV[2] holds the costs
-- of k requests, separated by spaces, each decided in turn at the same
-- `now` on the state the one before it left (`meter_step.lua`, run once
-- per request), exactly as k calls one after another would be; the hash is
-- written once, after the last (Redis's clock stands still while a script
-- runs, so the one PEXPIRE sets the very expiry the last allowed request's
-- would). Reply: the k replies one after the other.
local replies, at, wrote = {}, 0, false
for text in string.gmatch(ARGV[2], '%d+') do
  local cost = tonumber(text)
