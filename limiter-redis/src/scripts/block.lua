-- Blocks ARGV[1] for ARGV[2] µs from now (the server's clock), a block of
-- origin ARGV[3], of which at most ARGV[4] are kept:
-- 'o', an operator's, in the hash KEYS[1] (key -> when its block ends): a
--   new key past the bound is refused ({ 0 }) once ended blocks are swept;
-- 'p', a penalty's, in the sorted set KEYS[2] (key scored by when its
--   block ends): ended ones are dropped, and past the bound the penalty
--   blocks of other keys that end soonest are evicted, so a later offender
--   is always blocked.
-- With KEYS[3] (the notices' version hash: an operator's block, not a
-- penalty's), counts the change there, in the same step, so a late block
-- is still seen by every instance.
-- Answers { 1 } when the block is kept.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local key = ARGV[1]
local ends = string.format('%d', now + tonumber(ARGV[2]))
local bound = tonumber(ARGV[4])

if ARGV[3] == 'o' then
  if redis.call('HEXISTS', KEYS[1], key) == 0 and redis.call('HLEN', KEYS[1]) >= bound then
    -- Full: sweep the ended blocks, a page at a time (rare: only at the bound).
    local cursor = '0'
    repeat
      local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 1000)
      cursor = page[1]
      local entries = page[2]
      for i = 1, #entries, 2 do
        if tonumber(entries[i + 1]) <= now then
          redis.call('HDEL', KEYS[1], entries[i])
        end
      end
    until cursor == '0'
    if redis.call('HLEN', KEYS[1]) >= bound then
      return { 0 }
    end
  end
  redis.call('HSET', KEYS[1], key, ends)
  if KEYS[3] then
    redis.call('HINCRBY', KEYS[3], 'changes', 1)
  end
  return { 1 }
end

-- At most 100 ended blocks a call: each call adds one, so they drain.
local ended = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)
if #ended > 0 then
  redis.call('ZREM', KEYS[2], unpack(ended))
end
redis.call('ZADD', KEYS[2], ends, key)
local over = redis.call('ZCARD', KEYS[2]) - bound
if over > 0 then
  local soonest = redis.call('ZRANGE', KEYS[2], 0, over)
  for i = 1, #soonest do
    if over == 0 then
      break
    end
    if soonest[i] ~= key then
      redis.call('ZREM', KEYS[2], soonest[i])
      over = over - 1
    end
  end
end
return { 1 }
