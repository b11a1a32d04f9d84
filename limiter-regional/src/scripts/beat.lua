-- Another region's heartbeat, answered here: it is heard now (this Redis's
-- clock), and learns this region's records (see contacts.lua).
-- KEYS: the heard hash, the contacts hash.
-- ARGV: (now: unused), (cost: unused), the beating region's name.
-- Reply: this region's records (records.lua).
db.call('HSET', KEYS[1], ARGV[3], int(now))
return records(KEYS[2], KEYS[1])
