-- Decides a request of `cost` on the stored state, as a check of its own
-- reading the hash would: `allowed`, and the stored state, to be written,
-- brought up to it. The reply's values follow in `meter_answer.lua` (a
-- batch's client works them out itself from the same state).
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
local allowed = level + need <= full
if allowed then
  level = level + need
  stored_level, stored_updated, stored_unit = level, math.max(now, updated), unit
end
