-- Lifts ARGV[1]'s blocks: the operator's (hash KEYS[1]) and the
-- penalty's (sorted set KEYS[2]).
return { redis.call('HDEL', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1]) }
