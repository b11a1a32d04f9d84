-- The fixed window. ARGV: now, cost, limit, window.
-- A hash: a = "fixed_window", c = count, s = start of the window (the key's
-- first request).
local key = KEYS[1]
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
local state = read_hash(key, 'fixed_window', 'c', 's')
local count, start = tonumber(state[1]), tonumber(state[2])
if not count or now >= start + window then
  count, start = 0, now
end
local ends_in = start + window - now
local retry = ends_in
if count + cost <= limit then
  count, retry = count + cost, -1
  redis.call('HSET', key, 'a', 'fixed_window', 'c', int(count), 's', int(start))
  expire_in(key, ends_in)
end
-- The whole quota returns at once, when the window ends.
-- A count above the limit was counted under a larger one (a plan changed).
return { retry < 0 and 1 or 0, 0, retry, 0, ends_in, 1, math.max(limit - count, 0), ends_in }
