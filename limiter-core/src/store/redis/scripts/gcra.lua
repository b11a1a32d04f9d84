-- GCRA, answering like redis-cell's CL.THROTTLE. ARGV: now, cost, emission
-- interval T, tolerance tau = T * burst. The value is the theoretical arrival time.
local key = KEYS[1]
local interval, tolerance = tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = tonumber(read('GET', key))
local earliest = math.max(tat or now, now)
local new_tat = earliest + cost * interval
local retry, ttl
if new_tat > now + tolerance then
  retry, ttl = new_tat - tolerance - now, earliest - now
else
  retry, ttl = -1, new_tat - now
  redis.call('SET', key, int(new_tat), 'PX', ttl_ms(ttl))
end
return { retry < 0 and 1 or 0, 0, retry, 0, 1, floor_div(tolerance - ttl, interval), ttl }
