-- The concurrency limit. ARGV: now, cost (1), the operation ("a" acquire,
-- "n" renew, "r" release), the permit's id, the limit, the lease (µs).
-- A sorted set: the permits held, each scored by when its lease ends. A
-- permit whose lease has ended (its holder stopped renewing it: its
-- instance died) no longer counts. The key lives until the last lease ends.
-- Reply: acquire { 1, held } (held now, this permit included) or
-- { 0, held }; renew { 1 } or { 0 } (the permit is gone); release { removed }.
local key = KEYS[1]
local operation, id = ARGV[3], ARGV[4]
if operation == 'r' then
  return { read('ZREM', key, id) or 0 }
end
local limit, lease = tonumber(ARGV[5]), tonumber(ARGV[6])

local function live_until_last_lease()
  local last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if last[2] then
    expire_in(key, tonumber(last[2]) - now)
  end
end

if operation == 'n' then
  -- A lease ended but not yet removed is renewed: no permit was taken since
  -- it ended (taking one removes it first), so none was counted without it.
  if not read('ZSCORE', key, id) then
    return { 0 }
  end
  redis.call('ZADD', key, int(now + lease), id)
  live_until_last_lease()
  return { 1 }
end

-- Acquire: the ended leases leave first.
read('ZREMRANGEBYSCORE', key, '-inf', int(now))
local held = redis.call('ZCARD', key)
if held >= limit then
  return { 0, held }
end
redis.call('ZADD', key, int(now + lease), id)
live_until_last_lease()
return { 1, held + 1 }
