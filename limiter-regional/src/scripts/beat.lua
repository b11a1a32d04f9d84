-- Another region's heartbeat, answered here: it is heard now (this Redis's
-- clock), and learns this region's records (see contacts.lua).
-- KEYS: the heard hash, the contacts hash.
-- ARGV: (now: unused), (cost: unused), the beating region's name.
-- Reply: the number of contacts fields, the contacts hash, the heard hash
-- (as HGETALL answers them).
db.call('HSET', KEYS[1], ARGV[3], int(now))
local contacts = db.call('HGETALL', KEYS[2])
local heard = db.call('HGETALL', KEYS[1])
local reply = { tostring(#contacts) }
for _, v in ipairs(contacts) do
  reply[#reply + 1] = v
end
for _, v in ipairs(heard) do
  reply[#reply + 1] = v
end
return reply
