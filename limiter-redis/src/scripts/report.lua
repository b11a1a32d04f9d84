-- Publishes ARGV[5] as instance ARGV[3]'s report in the hash KEYS[1]
-- (instance -> `{published µs} {ttl µs} {body}`), read for ARGV[4] µs; the
-- hash lasts as long as the longest-lived report written last. An instance
-- new to the board first makes the reports past their time leave (reading
-- only reads, so it keeps working while Redis is over `maxmemory`): a
-- board holds the live reports, and those of instances gone since the last
-- one joined, at most ARGV[6]. An instance already there writes its own
-- without reading the others. A new instance past ARGV[6] live reporters
-- is refused: answers { 0 }.
local ttl = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[1], ARGV[3]) == 0 then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local at, lasts = string.match(all[i + 1], '^(%d+) (%d+) ')
    if at == nil or now - tonumber(at) > tonumber(lasts) then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[6]) then
    return { 0 }
  end
end
redis.call('HSET', KEYS[1], ARGV[3], string.format('%d %d ', now, ttl) .. ARGV[5])
local left = redis.call('PTTL', KEYS[1])
local wanted = math.floor(ttl / 1000) + 1
if left < wanted then
  redis.call('PEXPIRE', KEYS[1], wanted)
end
return { 1 }
