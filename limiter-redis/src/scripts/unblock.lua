-- Lifts ARGV[1]'s block.
return { redis.call('HDEL', KEYS[1], ARGV[1]) }
