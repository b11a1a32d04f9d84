-- Writes what a sync learned and concluded into one region's hash (see
-- shared.lua): other regions' counts, kept when they are newer or larger
-- (counts only grow within a window), and the verdicts.
-- ARGV: now, (cost: unused), window, start (the synced window), tag, flags
-- (any of: t tighten, x exhausted, o this is the announcing region,
-- l this region's own sync has learned the others' counts: its hold ends),
-- then
-- for each region: name, its count in `start`, in the window before (both
-- empty: nothing learned, report only).
-- Reply: { this region's own count in `start`, in the window before,
-- tightened, exhausted, then for each region given: its known counts in
-- `start` and in the window before }.
local key = KEYS[1]
local w, start = tonumber(ARGV[3]), tonumber(ARGV[4])
local tag, flags = ARGV[5], ARGV[6]
local fields = field_names({ 's', 'c', 'p', 't', 'x' }, 7, 3)
fields[#fields + 1] = 'h'
local state = read_hash(key, tag, unpack(fields))
local function num(i)
  return tonumber(state[i])
end
local held_at = #fields

local updates = {}
local function set(field, value)
  updates[#updates + 1] = field
  updates[#updates + 1] = value
end
local reply = {}
reply[1], reply[2] = counts_for(num(1), num(2) or 0, num(3) or 0, start, w)
for i = 7, #ARGV, 3 do
  local f = 6 + (i - 7) / 3 * 3
  local rs, rc, rp = num(f), num(f + 1) or 0, num(f + 2) or 0
  local c_in, p_in = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if c_in and p_in then
    if not rs or rs < start - w then
      rs, rc, rp = start, c_in, p_in
    elseif rs == start - w then
      rs, rc, rp = start, c_in, math.max(p_in, rc)
    elseif rs == start then
      rc, rp = math.max(rc, c_in), math.max(rp, p_in)
    elseif rs == start + w then
      rp = math.max(rp, c_in)
    end
    local name = ARGV[i]
    set(name .. ':s', int(rs))
    set(name .. ':c', int(rc))
    set(name .. ':p', int(rp))
  end
  local n = #reply
  reply[n + 1], reply[n + 2] = counts_for(rs, rc, rp, start, w)
end

local t, x = num(4), num(5)
if string.find(flags, 't', 1, true) and not (t and t >= start) then
  t = start
  set('t', int(start))
end
if string.find(flags, 'x', 1, true) and not (x and x >= start) then
  x = start
  set('x', int(start))
  if string.find(flags, 'o', 1, true) then
    -- The announcing region's own checks have nothing to notice.
    set('y', int(start))
  end
end
local release = string.find(flags, 'l', 1, true) and num(held_at) == start
if #updates > 0 then
  redis.call('HSET', key, 'a', tag, unpack(updates))
  extend(key, start + 2 * w - now)
end
if release then
  redis.call('HDEL', key, 'h', 'r')
end
return { reply[1], reply[2], t == start and 1 or 0, x == start and 1 or 0, unpack(reply, 3) }
