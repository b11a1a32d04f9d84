-- The live blocks of the hash KEYS[1]: key, µs left, flat; the ended ones
-- are deleted.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  local left = tonumber(all[i + 1]) - now
  if left > 0 then
    live[#live + 1] = all[i]
    live[#live + 1] = string.format('%d', left)
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return live
