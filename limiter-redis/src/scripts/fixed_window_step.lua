-- Decides a request of `cost` on the stored window, as a check of its own
-- reading the hash would: `allowed`, and the stored state, to be written,
-- brought up to it. The reply's values follow in `fixed_window_answer.lua`
-- (a batch's client works them out itself from the same state).
local count, start = stored_count, stored_start
if not count or now >= start + window then
  count, start = 0, now
end
local allowed = count + cost <= limit
if allowed then
  count = count + cost
  stored_count, stored_start = count, start
end
