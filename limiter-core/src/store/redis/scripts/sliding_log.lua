-- The sliding log. ARGV: now, cost, n, then n pairs (limit, window).
-- A ZSET of allowed requests scored by time; members are "{time}-{i}", where
-- i counts the entries already at that time (entries leave by score, a whole
-- microsecond at once), so members are unique however many instances share a
-- microsecond.
local key = KEYS[1]
local n = tonumber(ARGV[3])
local limits, windows = {}, {}
local longest = 0
for i = 1, n do
  limits[i] = tonumber(ARGV[2 + 2 * i])
  windows[i] = tonumber(ARGV[3 + 2 * i])
  if windows[i] > longest then
    longest = windows[i]
  end
end

if now >= longest then
  read('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
else
  read('ZCARD', key)
end

local counts, floors = {}, {}
local retry, decided = -1, 0
for i = 1, n do
  -- The window starts after now - W.
  floors[i] = now >= windows[i] and '(' .. int(now - windows[i]) or '-inf'
  -- Entries later than now (the clock stepped back) count too: exact either way.
  local count = redis.call('ZCOUNT', key, floors[i], '+inf')
  if count + cost > limits[i] then
    -- Passes once the oldest `excess` entries have left; the last of them decides.
    local excess = count + cost - limits[i]
    local blocking = redis.call('ZRANGEBYSCORE', key, floors[i], '+inf', 'WITHSCORES', 'LIMIT', excess - 1, 1)
    local wait = tonumber(blocking[2]) + windows[i] - now
    if wait > retry then
      retry, decided = wait, i - 1
    end
  end
  counts[i] = count
end

local allowed = retry < 0
local recorded = 0
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest = tonumber(last[2])
if allowed then
  recorded = cost
  -- Entries already at now: none unless the newest is at or after now.
  local taken = 0
  if newest and newest >= now then
    taken = redis.call('ZCOUNT', key, int(now), int(now))
  end
  if not newest or newest < now then
    newest = now
  end
  local entries = {}
  for j = 0, cost - 1 do
    entries[#entries + 1] = int(now)
    entries[#entries + 1] = int(now) .. '-' .. int(taken + j)
  end
  redis.call('ZADD', key, unpack(entries))
  expire_in(key, longest)
end

local reply = { allowed and 1 or 0, decided, retry, 0, n }
local fewest = nil
for i = 1, n do
  local remaining = math.max(0, limits[i] - counts[i] - recorded)
  local reset = 0
  if newest and newest + windows[i] > now then
    reset = newest + windows[i] - now
  end
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
  if fewest == nil or remaining < fewest then
    fewest = remaining
    if allowed then
      reply[2] = i - 1
    end
  end
end
return reply
