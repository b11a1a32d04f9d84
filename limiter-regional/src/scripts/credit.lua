-- What the others gave this region for a window, added to its lease; the
-- ask is answered. Given for a window that is over here (or for state that
-- is gone), it is dropped, never counted in another window.
-- ARGV: now, (cost: unused), window, the window's start, sliding (1/0),
-- what was given, then for each region that answered: its name, its count.
-- Reply: { 1 when credited, else 0 }.
local key = KEYS[1]
local w, start = tonumber(ARGV[3]), tonumber(ARGV[4])
local tag = ARGV[5] == '1' and 'regional_sliding_window' or 'regional_fixed_window'
local given = tonumber(ARGV[6])
local state = read_hash(key, tag, 's')
if tonumber(state[1]) ~= start then
  return { 0 }
end
local fields = { 'q', '0' }
if given == 0 then
  fields[3], fields[4] = 'z', int(now)
end
for i = 7, #ARGV, 2 do
  fields[#fields + 1] = ARGV[i] .. ':s'
  fields[#fields + 1] = int(start)
  fields[#fields + 1] = ARGV[i] .. ':c'
  fields[#fields + 1] = ARGV[i + 1]
end
db.call('HINCRBY', key, 'g', given)
db.call('HSET', key, unpack(fields))
return { 1 }
