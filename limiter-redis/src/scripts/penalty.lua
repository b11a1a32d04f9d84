-- A denial counted by a penalty (limiter_core::PenaltyState::record, the
-- same steps). ARGV: now (empty: the server's clock), after, within (µs),
-- then the blocks (µs) of each offence. A hash: d = the recent denials'
-- times, space-separated; o = offences; e = until when the next offence
-- escalates. Reply: { the block earned in µs, or -1 }.
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local after, within = tonumber(ARGV[2]), tonumber(ARGV[3])
local steps = #ARGV - 3
local state = redis.pcall('HMGET', key, 'd', 'o', 'e')
if type(state) == 'table' and state.err then
  redis.call('DEL', key)
  state = {}
end
local denials = {}
local since = now - within
for t in string.gmatch(state[1] or '', '%d+') do
  local time = tonumber(t)
  if time > since then
    denials[#denials + 1] = time
  end
end
denials[#denials + 1] = now
local offences, escalates = tonumber(state[2]) or 0, tonumber(state[3]) or 0
local block = -1
if #denials >= after then
  denials = {}
  if now >= escalates then
    offences = 0
  end
  block = tonumber(ARGV[3 + math.min(offences + 1, steps)])
  offences = offences + 1
  escalates = now + block + within
end
local times = {}
for i, t in ipairs(denials) do
  times[i] = string.format('%d', t)
end
redis.call('HSET', key, 'd', table.concat(times, ' '), 'o', offences, 'e', string.format('%d', escalates))
local expires = escalates
if #denials > 0 then
  expires = math.max(expires, denials[#denials] + within)
end
local ttl = math.max(1, math.ceil((expires - now) / 1000))
if ARGV[1] ~= '' then
  ttl = ttl + 60000
end
redis.call('PEXPIRE', key, ttl)
return { block }
