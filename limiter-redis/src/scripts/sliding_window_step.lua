-- Decides a request of `cost` on the stored counters, as a check of its
-- own reading the hash would: `allowed`, and the stored state, to be
-- written, brought up to it. The reply's values follow in
-- `sliding_window_answer.lua` (a batch's client works them out itself from
-- the same state).
local start = floor_div(now, w) * w
local previous, current = stored_previous, stored_current
if stored_start and stored_start >= start then
  -- As stored; a window later than now's (the clock stepped back) stays current.
  start = stored_start
elseif stored_start and stored_start + w == start then
  previous, current = current, 0
else
  previous, current = 0, 0
end
local elapsed = math.max(0, now - start)
local allowed = passes(previous, current, elapsed, cost)
if allowed then
  current = current + cost
end
-- When the counts stop weighing: the state expires then.
local reset = 0
if current > 0 then
  reset = start + 2 * w - now
elseif previous > 0 then
  reset = start + w - now
end
if allowed then
  stored_previous, stored_current, stored_start, expires_in = previous, current, start, reset
end
