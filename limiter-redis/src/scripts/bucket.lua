-- The token bucket, the leaky bucket and GCRA: one meter. ARGV: now, cost,
-- unit, drain, capacity, kind ("0" the token bucket, "1" the leaky bucket,
-- which answers a delay, "g" GCRA, whose water is how far its theoretical
-- arrival time lies ahead of now).
-- A hash: a = "bucket" (both buckets: the same meter) or "gcra", l = water
-- level in sub-units (a token is `unit` of them), u = when it was last
-- brought up to date, n = the unit it was written in. It drains `drain`
-- sub-units per µs.
local key = KEYS[1]
local unit, drain, capacity = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local pacing = ARGV[6] == '1'
local tag = ARGV[6] == 'g' and 'gcra' or 'bucket'
local state = read_hash(key, tag, 'l', 'u', 'n')
local level, updated = tonumber(state[1]), tonumber(state[2])
local full = capacity * unit
if not level then
  level, updated = 0, now
else
  -- Written under another policy (a plan changed): the same tokens in this
  -- policy's sub-units, a partly drained one counted whole; never more
  -- than this bucket holds (Level::in_units_of).
  local written_in = tonumber(state[3]) or unit
  if written_in ~= unit and level > 0 then
    local tokens = ceil_div(level, written_in)
    level = tokens >= capacity and full or tokens * unit
  end
  level = math.min(level, full)
end
if now > updated then
  local elapsed = now - updated
  if elapsed >= ceil_div(level, drain) then
    level = 0
  else
    level = level - elapsed * drain
  end
end
local need = cost * unit
local retry, delay = -1, 0
if level + need <= full then
  if pacing then
    delay = ceil_div(level, drain)
  end
  level = level + need
  redis.call('HSET', key, 'a', tag, 'l', int(level), 'u', int(math.max(now, updated)), 'n', int(unit))
  expire_in(key, ceil_div(level, drain))
else
  retry = ceil_div(level + need - full, drain)
end
local remaining = floor_div(full - level, unit)
-- One token more than remaining fits once the water is that low.
local available = retry
if retry < 0 then
  available = level > 0 and ceil_div(level - (full - (remaining + 1) * unit), drain) or 0
end
return { retry < 0 and 1 or 0, 0, retry, delay, ceil_div(level, drain), 1, remaining, available }
