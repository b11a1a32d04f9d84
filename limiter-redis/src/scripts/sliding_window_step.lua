-- Decides a request of `cost` on the stored counters, as a check of its
-- own reading the hash would: `allowed` (the stored state is then the one
-- to write) and the reply's 8 values, `r1` to `r8`.
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

local retry = -1
local allowed = passes(previous, current, elapsed, cost)
if allowed then
  current = current + cost
else
  retry = wait_for(previous, current, cost, start, elapsed)
end

local reset = 0
if current > 0 then
  reset = start + 2 * w - now
elseif previous > 0 then
  reset = start + w - now
end
if allowed then
  stored_previous, stored_current, stored_start, expires_in = previous, current, start, reset
end
local remaining = math.floor(math.max(limit - weighted(previous, current, elapsed), 0))
-- One more request fits once a request costing one more than what remains passes.
local available = retry
if allowed then
  available = remaining < limit and wait_for(previous, current, remaining + 1, start, elapsed) or 0
end
local r1, r2, r3, r4 = allowed and 1 or 0, 0, retry, 0
local r5, r6, r7, r8 = reset, 1, remaining, available
