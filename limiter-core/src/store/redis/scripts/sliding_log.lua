-- The sliding log. ARGV: now, cost, n, then n pairs (limit, window).
-- A ZSET of allowed requests scored by time; members are "{time}-{i}", where
-- i counts the entries already at that time (entries leave by score, a whole
-- microsecond at once), so members are unique however many instances share a
-- microsecond.
local key = KEYS[1]
local n = tonumber(ARGV[3])
local limits, windows = {}, {}
local longest, longest_limit = 0, 0
for i = 1, n do
  limits[i] = tonumber(ARGV[2 + 2 * i])
  windows[i] = tonumber(ARGV[3 + 2 * i])
  if windows[i] > longest then
    longest, longest_limit = windows[i], limits[i]
  end
end

if now >= longest then
  read('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
else
  read('ZCARD', key)
end

-- The lower end of the window (now - W, now].
local function floor_of(w)
  return now >= w and '(' .. int(now - w) or '-inf'
end

-- Two ways to look into the log. Every entry passed every rule, so the
-- longest window holds at most its rule's limit: when that is small, the
-- window is fetched whole in one call and read in Lua; otherwise it is
-- counted in place, one call per question.
local FETCH_LIMIT = 64
local log = nil
if longest_limit <= FETCH_LIMIT then
  local found = redis.call('ZRANGEBYSCORE', key, floor_of(longest), int(now), 'WITHSCORES')
  log = {}
  for j = 2, #found, 2 do
    log[#log + 1] = tonumber(found[j])
  end
end

-- The index in `log` of the first entry inside the window W.
local function first_in(w)
  local i = 1
  while i <= #log and log[i] + w <= now do
    i = i + 1
  end
  return i
end

local function count_in(w)
  if log then
    return #log - first_in(w) + 1
  end
  return redis.call('ZCOUNT', key, floor_of(w), int(now))
end

-- The k-th oldest entry inside the window W.
local function entry_in(w, k)
  if log then
    return log[first_in(w) + k - 1]
  end
  local found = redis.call('ZRANGEBYSCORE', key, floor_of(w), int(now), 'WITHSCORES', 'LIMIT', k - 1, 1)
  return tonumber(found[2])
end

-- The newest entry at or before now (older ones outside every window are gone).
local function newest()
  if log then
    return log[#log]
  end
  local found = redis.call('ZREVRANGEBYSCORE', key, int(now), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  return tonumber(found[2])
end

-- How many entries are at exactly now (they sort last).
local function taken_at_now()
  if not log then
    return redis.call('ZCOUNT', key, int(now), int(now))
  end
  local taken = 0
  for j = #log, 1, -1 do
    if log[j] ~= now then
      break
    end
    taken = taken + 1
  end
  return taken
end

local counts = {}
local retry, decided = -1, 0
for i = 1, n do
  local count = count_in(windows[i])
  if count + cost > limits[i] then
    -- Passes once the oldest `excess` entries have left; the last of them decides.
    local excess = count + cost - limits[i]
    local wait = entry_in(windows[i], excess) + windows[i] - now
    if wait > retry then
      retry, decided = wait, i - 1
    end
  end
  counts[i] = count
end

local allowed = retry < 0
local recorded, last = 0, nil
if allowed then
  recorded, last = cost, now
  local taken = taken_at_now()
  local entries = {}
  for j = 0, cost - 1 do
    entries[#entries + 1] = int(now)
    entries[#entries + 1] = int(now) .. '-' .. int(taken + j)
  end
  redis.call('ZADD', key, unpack(entries))
  expire_in(key, longest)
else
  last = newest()
end

local reply = { allowed and 1 or 0, decided, retry, 0, n }
local fewest = nil
for i = 1, n do
  local remaining = math.max(0, limits[i] - counts[i] - recorded)
  local reset = 0
  if last and last + windows[i] > now then
    reset = last + windows[i] - now
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
