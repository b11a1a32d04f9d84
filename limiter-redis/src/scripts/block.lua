-- Blocks ARGV[1] for ARGV[2] µs from now (the server's clock): the hash
-- KEYS[1] maps each blocked key to when its block ends. With KEYS[2] (the
-- notices' version hash: an operator's block, not a penalty's), counts the
-- change there, in the same step, so a late block is still seen.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + tonumber(ARGV[2])))
if KEYS[2] then
  redis.call('HINCRBY', KEYS[2], 'changes', 1)
end
return { 1 }
