-- An operator's or a refund's change of this region's counts, leases kept.
-- ARGV: now, (cost: unused), window, sliding (1/0), what: `reset` forgets
-- the counts (the key finds the whole quota again), `refund` takes `cost`
-- off the window that counted the request recorded at `at` (this window or
-- the one before; an older one has left every estimate).
-- Then, for `refund`: at, cost.
-- Reply: { 1 when something changed, else 0 }.
local key = KEYS[1]
local w = tonumber(ARGV[3])
local tag = ARGV[4] == '1' and 'regional_sliding_window' or 'regional_fixed_window'
local state = read_hash(key, tag, 's', 'c', 'p')
local s = tonumber(state[1])
if not s then
  return { 0 }
end
if ARGV[5] == 'reset' then
  db.call('HSET', key, 'c', '0', 'p', '0')
  return { 1 }
end
local at, cost = tonumber(ARGV[6]), tonumber(ARGV[7])
local counted_in = floor_div(at, w) * w
if s == counted_in then
  db.call('HSET', key, 'c', int(math.max(0, (tonumber(state[2]) or 0) - cost)))
elseif s == counted_in + w then
  db.call('HSET', key, 'p', int(math.max(0, (tonumber(state[3]) or 0) - cost)))
else
  return { 0 }
end
return { 1 }
