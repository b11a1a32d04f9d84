-- Gives back a request counted by outcome (see `refund.rs`). ARGV: when it
-- was recorded (µs), its cost, the algorithm's name, and the window of a
-- window counter. What has left the windows already is not given back; a
-- key without state, or with another algorithm's, is left as it is.
local key = KEYS[1]
local at, cost, algorithm = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local format = string.format

if algorithm == 'sliding_log' then
  local stamp = format('%d', at)
  local members = redis.pcall('ZRANGEBYSCORE', key, stamp, stamp)
  if type(members) ~= 'table' or members.err then
    return { 0 }
  end
  -- The request's entries are any `cost` of those at its time ("{at}-{i}",
  -- alike but for their numbers). The highest numbers go, so that the
  -- numbers left stay 0..k-1, as the check numbers the entries it adds.
  local numbers = {}
  for _, member in ipairs(members) do
    local number = string.match(member, '^%d+%-(%d+)$')
    if number then
      numbers[#numbers + 1] = tonumber(number)
    end
  end
  table.sort(numbers)
  local removed = 0
  for i = #numbers, math.max(1, #numbers - cost + 1), -1 do
    removed = removed + redis.call('ZREM', key, stamp .. '-' .. numbers[i])
  end
  -- The marker "~" keeps the newest entry's time (see `sliding_log.lua`):
  -- when the newest entries were the ones given back, it moves down to the
  -- newest left, or goes with the last entry.
  if removed == #numbers and removed > 0 and tonumber(redis.call('ZSCORE', key, '~')) == at then
    local newest = redis.call('ZREVRANGE', key, 0, 1, 'WITHSCORES')
    if newest[3] then
      redis.call('ZADD', key, newest[4], '~')
    else
      redis.call('DEL', key)
    end
  end
  return { removed }
end

local window = tonumber(ARGV[4])
local state = redis.pcall('HMGET', key, 'a', 'c', 's', 'p')
if type(state) ~= 'table' or state.err or state[1] ~= algorithm then
  return { 0 }
end
local count, start = tonumber(state[2]), tonumber(state[3])
if algorithm == 'fixed_window' then
  -- Only the window that counted the request holds it.
  if start <= at and at < start + window then
    redis.call('HSET', key, 'c', format('%d', math.max(count - cost, 0)))
    return { 1 }
  end
elseif algorithm == 'sliding_window' then
  -- The current window, or the previous one once the next has begun.
  local counted_in = at - at % window
  if start == counted_in then
    redis.call('HSET', key, 'c', format('%d', math.max(count - cost, 0)))
    return { 1 }
  elseif start == counted_in + window then
    redis.call('HSET', key, 'p', format('%d', math.max(tonumber(state[4]) - cost, 0)))
    return { 1 }
  end
end
return { 0 }
