-- Decides a request of `cost` on the stored window, as a check of its own
-- reading the hash would: `allowed` (the stored state is then the one to
-- write) and the reply's 8 values, `r1` to `r8`.
local count, start = stored_count, stored_start
if not count or now >= start + window then
  count, start = 0, now
end
local ends_in = start + window - now
local retry = ends_in
local allowed = count + cost <= limit
if allowed then
  count, retry = count + cost, -1
  stored_count, stored_start = count, start
end
-- The whole quota returns at once, when the window ends.
-- A count above the limit was counted under a larger one (a plan changed).
local r1, r2, r3, r4 = allowed and 1 or 0, 0, retry, 0
local r5, r6, r7, r8 = ends_in, 1, math.max(limit - count, 0), ends_in
