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
-- Reply (`decide`): { retry after (-1 when allowed), deciding rule when
-- denied (0-based), newest entry - now, then each rule's count before this
-- request, then each rule's available after: for a rule that denied the
-- request its wait, else when its oldest entry leaves (0 without entries) }.
-- The caller derives remaining and reset after from them.
--
-- This file defines functions and runs nothing: `decide`, one request with
-- or without its writes, from `count` and `record`. The drivers call it
-- (`single.lua`, `receipted.lua`, `peek.lua`, `sliding_log_batch.lua`).
-- Redis runs the whole script on every call, and each function it defines
-- costs every call, the more so the more of the file's locals it keeps: so
-- few functions, which pass what they learn of the log as arguments and
-- answers.
local key = KEYS[1]
local format = string.format
local longest, n = tonumber(ARGV[4]), tonumber(ARGV[5])
-- Set by a call of several keys (`sliding_log_keys.lua`), which formats
-- them once for all: each rule's window's lower bound at now (`[i]`), the
-- trim's bound (`trim`) and now (`now`), as text. A call of one key formats
-- each where it needs it: making them all would cost it more.
local texts

-- Opens the log and counts each rule's window for a request of `cost`. A
-- check (`writes`) first trims what every window has left, and deletes a
-- key holding another algorithm's state (WRONGTYPE), as in the memory
-- store. A peek does neither and reads the same: `absent` for another
-- algorithm's state, `trimmed` the bound the trim would have cut at.
-- Answers the reply with the counts, and each rule that denies the request
-- its wait in its available-after place; its retry (-1: allowed); `absent`;
-- `trimmed`; and each rule's window's lower bound (nil for the longest).
local function count(cost, writes)
  -- What the longest window holds (less the marker).
  local total, absent, trimmed
  if not writes then
    total = db.pcall('ZCARD', key)
    if type(total) == 'table' then
      absent, total = true, 0
    elseif now >= longest then
      trimmed = format('(%d', now - longest)
      total = db.call('ZCOUNT', key, trimmed, '+inf')
    end
  elseif now >= longest then
    local trim = texts and texts.trim or format('%d', now - longest)
    if type(db.pcall('ZREMRANGEBYSCORE', key, '-inf', trim)) == 'table' then
      db.call('DEL', key)
    end
    total = db.call('ZCARD', key)
  else
    total = db.pcall('ZCARD', key)
    if type(total) == 'table' then
      db.call('DEL', key)
      total = 0
    end
  end
  total = total > 0 and total - 1 or 0
  -- The nils size the reply for two rules, so filling it in does not grow it.
  local reply, retry, afters = { -1, 0, 0, nil, nil, nil, nil }, -1, {}
  for i = 1, n do
    local limit, window = tonumber(ARGV[4 + 2 * i]), tonumber(ARGV[5 + 2 * i])
    -- The window is (now - W, +inf): entries later than now (the clock
    -- stepped back) count too, which keeps the limit exact either way.
    local counted, after = total, nil
    if window < longest then
      after = texts and texts[i] or format('(%d', now - window)
      -- A shorter window holds no more than the longest: an empty log (a
      -- key's first check) needs no count of it.
      if total > 0 then
        counted = db.call('ZCOUNT', key, after, '+inf')
        counted = counted > 0 and counted - 1 or 0
      end
    end
    reply[3 + i], afters[i] = counted, after
    if counted + cost > limit then
      -- Passes once the oldest `excess` entries have left; the last of them decides.
      after = after or texts and texts[i] or format('(%d', now - window)
      local blocking = absent and {} or db.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES',
        'LIMIT', format('%d', counted + cost - limit - 1), 1)
      local wait = tonumber(blocking[2]) + window - now
      reply[3 + n + i] = wait
      if wait > retry then
        retry = wait
        reply[1], reply[2] = wait, i - 1
      end
    end
  end
  return reply, retry, absent, trimmed, afters
end

-- Records an allowed request's `cost` entries at now and moves the marker up
-- to now. GT leaves a marker at or after now in place, and CH counts it when
-- it moves; an entry's member that exists already is not added. So the
-- reply is cost + 1 exactly when the log held nothing at or after now.
-- Answers the newest entry's time when it did (nil otherwise).
local function record(cost)
  local at = texts and texts.now or format('%d', now)
  local changed
  if cost == 1 then
    changed = db.call('ZADD', key, 'GT', 'CH', at, '~', at, at .. '-0')
  else
    local add = { 'ZADD', key, 'GT', 'CH', at, '~' }
    for j = 0, cost - 1 do
      add[7 + 2 * j], add[8 + 2 * j] = at, at .. '-' .. j
    end
    changed = db.call(unpack(add))
  end
  local newest
  if changed <= cost then
    -- Rare: entries at or after now (instances sharing a microsecond, or the
    -- clock stepped back). The marker stayed, so `changed` entries were added;
    -- the entries at now were numbered 0..k-1, and the ones not added are
    -- numbered after everything there now.
    newest = tonumber(db.call('ZSCORE', key, '~'))
    if changed < cost then
      local next
      if changed > 0 then
        -- k = cost - changed of ours collided, so 0..cost-1 are all taken now.
        next = cost
      else
        -- k >= cost: count them (less the marker when it is at now).
        next = db.call('ZCOUNT', key, at, at)
        if newest == now then
          next = next - 1
        end
      end
      local add = { 'ZADD', key }
      for j = 0, cost - changed - 1 do
        add[3 + 2 * j], add[4 + 2 * j] = at, at .. '-' .. (next + j)
      end
      db.call(unpack(add))
    end
  end
  db.call('PEXPIRE', key, ARGV[3])
  return newest
end

-- One request of `cost`: its reply, as a table. A check (`writes`) records
-- an allowed one; a peek reads what `record` would answer instead (the
-- marker's time when at or after now) and the log stays as it was.
local function decide(cost, writes)
  local reply, retry, absent, trimmed, afters = count(cost, writes)
  local recorded = retry < 0
  if not recorded then
    -- Denied: some rule counted an entry, so the marker is there.
    local marker = not absent and db.call('ZSCORE', key, '~')
    reply[3] = tonumber(marker) - now
  else
    local newest
    if writes then
      newest = record(cost)
    elseif not absent then
      newest = tonumber(db.call('ZSCORE', key, '~'))
      if newest and newest < now then
        newest = nil
      end
    end
    if newest then
      reply[3] = newest - now
    end
  end
  -- When each rule makes more quota available: a rule that denied the
  -- request once its wait is over (`count` put it in its place), any other
  -- once its oldest entry leaves its window. `recorded` says whether this
  -- request's entries (at now) are in the log (a peek's are not, but it
  -- answers as if).
  local oldest_overall
  for i = 1, n do
    if not reply[3 + n + i] then
      local window, wait = tonumber(ARGV[5 + 2 * i]), nil
      if reply[3 + i] == 0 then
        -- Nothing in the window but this request's entries, if any.
        wait = recorded and window or 0
      else
        local first
        if window >= longest and not trimmed then
          -- Everything left in the log is inside the longest window.
          oldest_overall = oldest_overall or db.call('ZRANGE', key, '0', '0', 'WITHSCORES')
          first = oldest_overall
        else
          -- A peek that did not trim reads from the bound the trim would cut at.
          first = db.call('ZRANGEBYSCORE', key, afters[i] or trimmed, '+inf', 'WITHSCORES',
            'LIMIT', '0', '1')
        end
        wait = tonumber(first[2]) + window - now
      end
      reply[3 + n + i] = wait
    end
  end
  return reply
end
