-- The reply's 8 values of the request `sliding_window_step.lua` decided,
-- `r1` to `r8`.
local retry = -1
if not allowed then
  retry = wait_for(previous, current, cost, start, elapsed)
end
local remaining = math.floor(math.max(limit - weighted(previous, current, elapsed), 0))
-- One more request fits once a request costing one more than what remains passes.
local available = retry
if allowed then
  available = remaining < limit and wait_for(previous, current, remaining + 1, start, elapsed) or 0
end
local r1, r2, r3, r4 = allowed and 1 or 0, 0, retry, 0
local r5, r6, r7, r8 = reset, 1, remaining, available
