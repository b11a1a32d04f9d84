-- The live overrides of the hash KEYS[1]: limit, µs left, text, flat; the
-- ended ones deleted.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local live = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ends, text = string.match(all[i + 1], '^(%d+) (.*)$')
  ends = tonumber(ends)
  if ends ~= nil and ends > now then
    live[#live + 1] = all[i]
    live[#live + 1] = string.format('%d', ends - now)
    live[#live + 1] = text
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return live
