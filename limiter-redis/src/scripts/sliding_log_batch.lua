-- Coalesced checks of one key under the sliding log (the hash algorithms
-- loop over their `step` instead: `hash_batch.lua`), after `sliding_log.lua`,
-- whose `decide` and locals it uses. ARGV[2] holds the costs of k requests
-- in runs, `{cost}x{times}` separated by spaces (as for the hash
-- algorithms). Each is decided in turn at the same `now`, exactly as k calls
-- one after another would be. Reply: the k replies in order, each as a
-- single call answers it, in runs: how many requests in a row got this
-- reply, then the reply (a flood of one key over its limit costs one reply
-- per batch, not one per request).
--
-- The first request is decided by `decide`: it trims the log, and deals
-- with a key of another type. When the log then holds nothing later than
-- now (the clock did not step back), the others are decided on what it
-- holds, read once: every request of the batch adds its entries at now,
-- after every entry there, so each rule's count is what the log held in
-- its window plus what the batch added, and an entry a denial waits for is
-- either one the log held (read by its rank in the window) or one at now.
-- Their entries are written once, numbered after those at now, as
-- `decide` numbers them. Otherwise each request runs `decide`.
-- `answer` copies what it keeps (every reply has the same length): its
-- caller may reuse `reply`.
local replies, r, last, times_at = {}, 0, {}, 0
local function answer(reply)
  local same = #reply == #last
  for i = 1, #reply do
    same = same and reply[i] == last[i]
  end
  if same then
    replies[times_at] = replies[times_at] + 1
    return
  end
  r = r + 1
  replies[r], times_at = 1, r
  for i = 1, #reply do
    r = r + 1
    replies[r], last[i] = reply[i], reply[i]
  end
end
local costs = {}
for cost_text, times in string.gmatch(ARGV[2], '(%d+)x(%d+)') do
  for _ = 1, tonumber(times) do
    costs[#costs + 1] = tonumber(cost_text)
  end
end
answer(decide(costs[1], true))
if #costs == 1 then
  return replies
end

local call = redis.call
local newest = tonumber(call('ZSCORE', key, '~'))
if newest and newest > now then
  for j = 2, #costs do
    answer(decide(costs[j], true))
  end
  return replies
end

-- Per rule: its limit, window, the window's lower bound, and the log's
-- count in it (less the marker).
local limits, windows, afters, held = {}, {}, {}, {}
local total = call('ZCARD', key)
if total > 0 then
  total = total - 1
end
for i = 1, n do
  limits[i], windows[i] = tonumber(ARGV[4 + 2 * i]), tonumber(ARGV[5 + 2 * i])
  afters[i] = format('(%d', now - windows[i])
  local counted = total
  if windows[i] < longest then
    counted = call('ZCOUNT', key, afters[i], '+inf')
    if counted > 0 then
      counted = counted - 1
    end
  end
  held[i] = counted
end
-- The score of the entry of rank `rank` (0: the oldest) in rule i's window,
-- once the batch has added its entries at now; read once per rank.
local scores = {}
local function score_at(i, rank)
  if rank >= held[i] then
    return now
  end
  local at = scores[i] and scores[i][rank]
  if not at then
    local entry = call('ZRANGEBYSCORE', key, afters[i], '+inf', 'WITHSCORES', 'LIMIT',
      format('%d', rank), 1)
    at = tonumber(entry[2])
    scores[i] = scores[i] or {}
    scores[i][rank] = at
  end
  return at
end

local added = 0
-- One reply and one table of waits, reused (`false`: the rule did not deny).
local reply, waits = {}, {}
for j = 2, #costs do
  local cost = costs[j]
  reply[1], reply[2], reply[3] = -1, 0, 0
  local retry = -1
  for i = 1, n do
    waits[i] = false
    local counted = held[i] + added
    reply[3 + i] = counted
    if counted + cost > limits[i] then
      -- Passes once the oldest `excess` entries have left; the last of them decides.
      local wait = score_at(i, counted + cost - limits[i] - 1) + windows[i] - now
      waits[i] = wait
      if wait > retry then
        retry = wait
        reply[1], reply[2] = wait, i - 1
      end
    end
  end
  local recorded = retry < 0
  if recorded then
    added = added + cost
  elseif added == 0 then
    reply[3] = newest - now
  end
  -- As `decide` answers when each rule makes more quota available.
  for i = 1, n do
    local wait = waits[i]
    if not wait then
      if reply[3 + i] == 0 then
        wait = recorded and windows[i] or 0
      else
        wait = score_at(i, 0) + windows[i] - now
      end
    end
    reply[3 + n + i] = wait
  end
  answer(reply)
end

if added > 0 then
  -- Numbered after the entries at now, as `decide` numbers its own (less
  -- the marker, when it is at now).
  local at = format('%d', now)
  local next = call('ZCOUNT', key, at, at)
  if newest == now then
    next = next - 1
  end
  call('ZADD', key, at, '~')
  local add, m = { 'ZADD', key }, 2
  for number = next, next + added - 1 do
    add[m + 1], add[m + 2] = at, at .. '-' .. number
    m = m + 2
    if m >= 2000 then
      call(unpack(add))
      add, m = { 'ZADD', key }, 2
    end
  end
  if m > 2 then
    call(unpack(add))
  end
  call('PEXPIRE', key, ARGV[3])
end
return replies
