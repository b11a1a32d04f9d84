-- Gives ARGV[1] the plan ARGV[2] in the hash KEYS[1] ('': the default,
-- which the hash does not hold); with KEYS[2] (the notices' version hash),
-- counts the change there.
local changed
if ARGV[2] == '' then
  changed = redis.call('HDEL', KEYS[1], ARGV[1])
else
  changed = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
if KEYS[2] then
  redis.call('HINCRBY', KEYS[2], 'changes', 1)
end
return { changed }
