-- What this region knows of a key's counts in the current window, writing
-- nothing: its own count and lease, and each other region's count as that
-- region last told it (at an ask or a give between the two, this window).
-- ARGV: now, (cost: unused), window, sliding (1/0), this region's share,
-- then the other regions' names.
-- Reply: { window start, this region's count, its lease (share and what it
-- was given, less what it gave), then for each other region its count, or
-- -1 when it told none this window }.
local key = KEYS[1]
local w = tonumber(ARGV[3])
local tag = ARGV[4] == '1' and 'regional_sliding_window' or 'regional_fixed_window'
local share = tonumber(ARGV[5])
local fields = { 's', 'c', 'g' }
for i = 6, #ARGV do
  fields[#fields + 1] = ARGV[i] .. ':s'
  fields[#fields + 1] = ARGV[i] .. ':c'
end
local state = hash_fields(key, tag, unpack(fields))
local start = floor_div(now, w) * w
local s = tonumber(state[2])
local here, lease = 0, share
if s and s >= start then
  start, here, lease = s, tonumber(state[3]) or 0, share + (tonumber(state[4]) or 0)
end
local reply = { start, here, lease }
for i = 5, #state, 2 do
  local told = tonumber(state[i]) == start and tonumber(state[i + 1]) or -1
  reply[#reply + 1] = told
end
return reply
