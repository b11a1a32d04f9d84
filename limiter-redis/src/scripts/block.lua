-- Blocks ARGV[1] for ARGV[2] µs from now (the server's clock): the hash
-- KEYS[1] maps each blocked key to when its block ends.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + tonumber(ARGV[2])))
return { 1 }
