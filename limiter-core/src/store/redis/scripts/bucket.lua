-- The token bucket and the leaky bucket: one meter. ARGV: now, cost, unit,
-- drain, capacity, pacing (1 for the leaky bucket's delay).
-- A hash: a = "bucket", l = water level in sub-units (a token is `unit` of them), u = when
-- it was last brought up to date. It drains `drain` sub-units per µs.
local key = KEYS[1]
local unit, drain, capacity = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local pacing = ARGV[6] == '1'
-- Token and leaky buckets share this state: the same meter.
local state = read_hash(key, 'bucket', 'l', 'u')
local level, updated = tonumber(state[1]), tonumber(state[2])
if not level then
  level, updated = 0, now
end
if now > updated then
  local elapsed = now - updated
  if elapsed >= ceil_div(level, drain) then
    level = 0
  else
    level = level - elapsed * drain
  end
end
local need, full = cost * unit, capacity * unit
local retry, delay = -1, 0
if level + need <= full then
  if pacing then
    delay = ceil_div(level, drain)
  end
  level = level + need
  redis.call('HSET', key, 'a', 'bucket', 'l', int(level), 'u', int(math.max(now, updated)))
  expire_in(key, ceil_div(level, drain))
else
  retry = ceil_div(level + need - full, drain)
end
return { retry < 0 and 1 or 0, 0, retry, delay, 1, floor_div(full - level, unit), ceil_div(level, drain) }
