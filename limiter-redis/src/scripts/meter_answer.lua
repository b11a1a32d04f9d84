-- The reply's 8 values of the request `meter_step.lua` decided, `r1` to
-- `r8`.
local retry, delay = -1, 0
if not allowed then
  retry = ceil_div(level + need - full, drain)
elseif pacing then
  -- The leaky bucket: it waits for the water ahead of it.
  delay = ceil_div(level - need, drain)
end
local remaining = floor_div(full - level, unit)
-- One token more than remaining fits once the water is that low.
local available = retry
if retry < 0 then
  available = level > 0 and ceil_div(level - (full - (remaining + 1) * unit), drain) or 0
end
local r1, r2, r3, r4 = allowed and 1 or 0, 0, retry, delay
local r5, r6, r7, r8 = ceil_div(level, drain), 1, remaining, available
