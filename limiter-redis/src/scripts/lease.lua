-- Leases of a key's permits (src/hot/lease.rs), on the state of the
-- sliding log and fixed window scripts. ARGV: now, the permits the asking
-- request needs, the operation, then:
-- 'L' (lease, sliding log): want, length, id, longest window, n, n pairs
--     (limit, window). The permits are entries scored at the lease's end
--     (now + length), members "{end}-{id}-{j}": each counts from its own
--     use, which comes earlier, until it leaves the window, which is later.
--     Reply: { granted, retry after (-1 when granted), deciding rule, the
--     lease's end, each rule's count before, each rule's available after }.
-- 'F' (lease, fixed window): want, length (unused: the lease ends with the
--     window), limit, window. Reply: { granted, retry after, window ends
--     in, count before, window start }.
-- 'l' (give back, sliding log): the lease's end, id, first and last + 1
--     unused j. 'f' (give back, fixed window): window start, unused.
--     Reply: { permits taken back }.
local key = KEYS[1]
local call, format = redis.call, string.format
local op = ARGV[3]

if op == 'l' then
  local prefix = ARGV[4] .. '-' .. ARGV[5] .. '-'
  local members = {}
  for j = tonumber(ARGV[6]), tonumber(ARGV[7]) - 1 do
    members[#members + 1] = prefix .. j
  end
  local removed = #members > 0 and redis.pcall('ZREM', key, unpack(members)) or 0
  if type(removed) == 'table' then
    removed = 0
  end
  return { removed }
end

if op == 'f' then
  local state = read_hash(key, 'fixed_window', 'c', 's')
  local count = tonumber(state[1])
  if count and state[2] == ARGV[4] then
    local back = math.min(count, tonumber(ARGV[5]))
    call('HSET', key, 'c', int(count - back))
    return { back }
  end
  return { 0 }
end

local want, length = tonumber(ARGV[4]), tonumber(ARGV[5])

if op == 'F' then
  local limit, window = tonumber(ARGV[6]), tonumber(ARGV[7])
  local state = read_hash(key, 'fixed_window', 'c', 's')
  local count, start = tonumber(state[1]), tonumber(state[2])
  if not count or now >= start + window then
    count, start = 0, now
  end
  local ends_in = start + window - now
  local granted = math.min(want, math.max(limit - count, 0))
  if granted < cost then
    return { 0, ends_in, ends_in, count, start }
  end
  call('HSET', key, 'a', 'fixed_window', 'c', int(count + granted), 's', int(start))
  expire_in(key, ends_in)
  return { granted, -1, ends_in, count, start }
end

-- 'L': trim what every window has left; a key holding another algorithm's
-- state (WRONGTYPE) is deleted and reads as absent.
local id, longest, n = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
if now >= longest then
  if type(redis.pcall('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - longest))) == 'table' then
    call('DEL', key)
  end
elseif type(redis.pcall('ZCARD', key)) == 'table' then
  call('DEL', key)
end

local reply = { 0, -1, 0, now + length }
local granted, retry = want, -1
local windows, waits = {}, {}
for i = 1, n do
  local limit, window = tonumber(ARGV[7 + 2 * i]), tonumber(ARGV[8 + 2 * i])
  local after = format('(%d', now - window)
  -- Entries later than now (leased, or the clock stepped back) count too;
  -- the marker '~' is in the window whenever an entry is.
  local count = call('ZCOUNT', key, after, '+inf')
  if count > 0 then
    count = count - 1
  end
  reply[4 + i] = count
  windows[i] = window
  granted = math.min(granted, math.max(limit - count, 0))
  if count + cost > limit then
    local blocking = call('ZRANGEBYSCORE', key, after, '+inf',
      'WITHSCORES', 'LIMIT', format('%d', count + cost - limit - 1), 1)
    local wait = tonumber(blocking[2]) + window - now
    waits[i] = wait
    if wait > retry then
      retry = wait
      reply[2], reply[3] = wait, i - 1
    end
  end
end

if retry < 0 then
  -- Granted: the entries at the lease's end, the marker moved up to them.
  local at = format('%d', now + length)
  local add = { 'ZADD', key, 'GT', at, '~' }
  local prefix = at .. '-' .. id .. '-'
  for j = 0, granted - 1 do
    add[6 + 2 * j], add[7 + 2 * j] = at, prefix .. j
  end
  call(unpack(add))
  -- The key lives until the last entry has left the longest window.
  local keep = ttl_ms(length + longest)
  if call('PTTL', key) < keep then
    call('PEXPIRE', key, keep)
  end
  reply[1] = granted
end

-- When each rule makes more quota available: a rule that denied once its
-- wait is over, any other once its oldest entry leaves (0 without entries).
for i = 1, n do
  local wait = waits[i]
  if wait == nil then
    local oldest = call('ZRANGEBYSCORE', key, format('(%d', now - windows[i]), '+inf',
      'WITHSCORES', 'LIMIT', '0', '1')
    wait = (oldest[1] and oldest[1] ~= '~') and (tonumber(oldest[2]) + windows[i] - now) or 0
  end
  reply[4 + n + i] = wait
end
return reply
