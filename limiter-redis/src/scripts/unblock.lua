-- Lifts ARGV[1]'s blocks: the operator's (hash KEYS[1]) and the
-- penalty's (sorted set KEYS[2]); with KEYS[3] (the notices' version
-- hash), counts the change there.
local lifted = redis.call('HDEL', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
if KEYS[3] then
  redis.call('HINCRBY', KEYS[3], 'changes', 1)
end
return { lifted }
