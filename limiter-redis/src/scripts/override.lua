-- Puts the override ARGV[3] (its text) on the limit ARGV[1] for ARGV[2] µs
-- from now (the server's clock), or ends it when ARGV[2] is 0, in the hash
-- KEYS[1] (limit -> 'end_µs text'); at most ARGV[4] limits hold one: past
-- it, once ended overrides are swept, another limit's is refused ({ 0 }).
-- Counts the change in the version hash KEYS[2], in the same step, so a
-- late change is still seen by every instance.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local limit = ARGV[1]
local left = tonumber(ARGV[2])
if left == 0 then
  redis.call('HDEL', KEYS[1], limit)
else
  if redis.call('HEXISTS', KEYS[1], limit) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
    local all = redis.call('HGETALL', KEYS[1])
    for i = 1, #all, 2 do
      local ends = tonumber(string.match(all[i + 1], '^(%d+)'))
      if ends == nil or ends <= now then
        redis.call('HDEL', KEYS[1], all[i])
      end
    end
    if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
      return { 0 }
    end
  end
  redis.call('HSET', KEYS[1], limit, string.format('%d', now + left) .. ' ' .. ARGV[3])
end
redis.call('HINCRBY', KEYS[2], 'changes', 1)
return { 1 }
