-- The sliding log. ARGV: now, cost, the key's TTL in ms (the longest window,
-- rounded up), the longest window, n, then n pairs (limit, window). The
-- caller sends what it can compute: turning numbers into text and back costs
-- Redis more than the calls themselves.
--
-- A ZSET of allowed requests scored by time. Members are "{time}-{i}", where
-- i counts the entries already at that time (entries leave by score, a whole
-- microsecond at once), so members are unique however many instances share a
-- microsecond. One more member, "~", is scored with the newest entry's time:
-- it is trimmed with the newest entry, so it is present exactly when entries
-- are, and it falls in a window exactly when some entry does (every count
-- below subtracts it). It sorts after the entries of its time ('~' follows
-- the digits), so it is never the entry that blocks a request. It lets one
-- ZADD tell whether the log held anything at or after now, which the
-- uniqueness of members and the reset time depend on.
--
-- Reply: { retry after (-1 when allowed), deciding rule when denied
-- (0-based), newest entry - now, then each rule's count before this request,
-- then each rule's available after: for a rule that denied the request its
-- wait, else when its oldest entry leaves (0 without entries) }. The caller
-- derives remaining and reset after from them.
local key = KEYS[1]
local call, format = redis.call, string.format
local longest, n = tonumber(ARGV[4]), tonumber(ARGV[5])

-- Trim what every window has left, and count what the longest one holds. A
-- key holding another algorithm's state (WRONGTYPE) is deleted and reads as
-- absent, as in the memory store.
local total
if now >= longest then
  if type(redis.pcall('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - longest))) == 'table' then
    call('DEL', key)
  end
  total = call('ZCARD', key)
else
  total = redis.pcall('ZCARD', key)
  if type(total) == 'table' then
    call('DEL', key)
    total = 0
  end
end
if total > 0 then
  total = total - 1
end

local reply = { -1, 0, 0 }
local retry = -1
-- Per rule: its window, and its wait when it denies the request.
local windows, waits = {}, {}
for i = 1, n do
  local limit, window = tonumber(ARGV[4 + 2 * i]), tonumber(ARGV[5 + 2 * i])
  -- The window is (now - W, +inf): entries later than now (the clock
  -- stepped back) count too, which keeps the limit exact either way.
  local count, after = total, nil
  if window < longest then
    after = format('(%d', now - window)
    count = call('ZCOUNT', key, after, '+inf')
    if count > 0 then
      count = count - 1
    end
  end
  reply[3 + i] = count
  windows[i] = window
  if count + cost > limit then
    -- Passes once the oldest `excess` entries have left; the last of them decides.
    after = after or format('(%d', now - window)
    local blocking = call('ZRANGEBYSCORE', key, after, '+inf',
      'WITHSCORES', 'LIMIT', format('%d', count + cost - limit - 1), 1)
    local wait = tonumber(blocking[2]) + window - now
    waits[i] = wait
    if wait > retry then
      retry = wait
      reply[1], reply[2] = wait, i - 1
    end
  end
end

-- When each rule makes more quota available: a rule that denied the request
-- once its wait is over, any other once its oldest entry leaves its window.
-- `recorded` says whether this request's entries (at now) are in the log.
local function available(recorded)
  local oldest_overall
  for i = 1, n do
    local window, count = windows[i], reply[3 + i]
    local wait = waits[i]
    if wait == nil then
      if count == 0 then
        -- Nothing in the window but this request's entries, if any.
        wait = recorded and window or 0
      else
        local oldest
        if window >= longest then
          -- Everything left in the log is inside the longest window.
          oldest_overall = oldest_overall or call('ZRANGE', key, '0', '0', 'WITHSCORES')
          oldest = oldest_overall
        else
          oldest = call('ZRANGEBYSCORE', key, format('(%d', now - window), '+inf',
            'WITHSCORES', 'LIMIT', '0', '1')
        end
        wait = tonumber(oldest[2]) + window - now
      end
    end
    reply[3 + n + i] = wait
  end
end

if retry >= 0 then
  -- Denied: some rule counted an entry, so the marker is there.
  reply[3] = tonumber(call('ZSCORE', key, '~')) - now
  available(false)
  return reply
end

-- Allowed: record `cost` entries at now and move the marker up to now. GT
-- leaves a marker at or after now in place, and CH counts it when it moves;
-- an entry's member that exists already is not added. So the reply is
-- cost + 1 exactly when the log held nothing at or after now.
local at = format('%d', now)
local changed
if cost == 1 then
  changed = call('ZADD', key, 'GT', 'CH', at, '~', at, at .. '-0')
else
  local add = { 'ZADD', key, 'GT', 'CH', at, '~' }
  for j = 0, cost - 1 do
    add[7 + 2 * j], add[8 + 2 * j] = at, at .. '-' .. j
  end
  changed = call(unpack(add))
end
if changed <= cost then
  -- Rare: entries at or after now (instances sharing a microsecond, or the
  -- clock stepped back). The marker stayed, so `changed` entries were added;
  -- the entries at now were numbered 0..k-1, and the ones not added are
  -- numbered after everything there now.
  local newest = tonumber(call('ZSCORE', key, '~'))
  reply[3] = newest - now
  if changed < cost then
    local next
    if changed > 0 then
      -- k = cost - changed of ours collided, so 0..cost-1 are all taken now.
      next = cost
    else
      -- k >= cost: count them (less the marker when it is at now).
      next = call('ZCOUNT', key, at, at)
      if newest == now then
        next = next - 1
      end
    end
    local add = { 'ZADD', key }
    for j = 0, cost - changed - 1 do
      add[3 + 2 * j], add[4 + 2 * j] = at, at .. '-' .. (next + j)
    end
    call(unpack(add))
  end
end
call('PEXPIRE', key, ARGV[3])
available(true)
return reply
