-- Gives ARGV[1] the plan ARGV[2] in the hash KEYS[1] ('': the default,
-- which the hash does not hold).
if ARGV[2] == '' then
  return { redis.call('HDEL', KEYS[1], ARGV[1]) }
end
return { redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) }
