-- The live blocks: key, µs left, origin ('o' an operator's, from the hash
-- KEYS[1]; 'p' a penalty's, from the sorted set KEYS[2]), flat. The ended
-- ones are deleted, and past ARGV[1] penalty blocks the soonest-ending
-- ones, as block.lua would have evicted them.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local live = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local left = tonumber(all[i + 1]) - now
  if left > 0 then
    live[#live + 1] = all[i]
    live[#live + 1] = string.format('%d', left)
    live[#live + 1] = 'o'
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[1])
if over > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
local penalties = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #penalties, 2 do
  live[#live + 1] = penalties[i]
  live[#live + 1] = string.format('%d', tonumber(penalties[i + 1]) - now)
  live[#live + 1] = 'p'
end
return live
