-- The reply's 8 values of the request `fixed_window_step.lua` decided, `r1`
-- to `r8`. The whole quota returns at once, when the window ends.
local ends_in = start + window - now
local retry = allowed and -1 or ends_in
-- A count above the limit was counted under a larger one (a plan changed).
local r1, r2, r3, r4 = allowed and 1 or 0, 0, retry, 0
local r5, r6, r7, r8 = ends_in, 1, math.max(limit - count, 0), ends_in
