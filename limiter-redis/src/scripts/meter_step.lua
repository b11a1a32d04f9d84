-- Decides a request of `cost` on the stored state, as a check of its own
-- reading the hash would: `allowed` (the stored state is then the one to
-- write) and the reply's 8 values, `r1` to `r8`.
local level, updated = stored_level, stored_updated
if not level then
  level, updated = 0, now
else
  -- Written under another policy (a plan changed): the same tokens in this
  -- policy's sub-units, a partly drained one counted whole; never more
  -- than this bucket holds (Level::in_units_of).
  if stored_unit ~= unit and level > 0 then
    local tokens = ceil_div(level, stored_unit)
    level = tokens >= capacity and full or tokens * unit
  end
  level = math.min(level, full)
end
if now > updated then
  local elapsed = now - updated
  if elapsed >= ceil_div(level, drain) then
    level = 0
  else
    level = level - elapsed * drain
  end
end
local need = cost * unit
local retry, delay = -1, 0
if level + need <= full then
  if pacing then
    delay = ceil_div(level, drain)
  end
  level = level + need
  stored_level, stored_updated, stored_unit = level, math.max(now, updated), unit
else
  retry = ceil_div(level + need - full, drain)
end
local remaining = floor_div(full - level, unit)
-- One token more than remaining fits once the water is that low.
local available = retry
if retry < 0 then
  available = level > 0 and ceil_div(level - (full - (remaining + 1) * unit), drain) or 0
end
local allowed = retry < 0
local r1, r2, r3, r4 = allowed and 1 or 0, 0, retry, delay
local r5, r6, r7, r8 = ceil_div(level, drain), 1, remaining, available
