-- A region's check: a fixed window or a sliding window counter, windows
-- aligned to multiples of the window so every region agrees on which window
-- a request belongs to, over this region's count plus what it knows of the
-- others' (see shared.lua for the hash).
-- ARGV: now, cost, limit, window, sliding (1/0), first tier, tier step,
-- then the other regions' names.
-- Reply: { allowed, sync, window start, now, this region's count in the
-- window (after this request), in the window before, the total of the
-- window before this request, the total of the window before, exhausted,
-- noticed, held }. `sync` asks for a sync: a tier was crossed, the sliding window
-- counter started a window here, or the quota is found full and not yet
-- announced, or this region is held until a sync completes. `noticed`:
-- this check is the first here to see another region's announcement.
local key = KEYS[1]
local limit, w = tonumber(ARGV[3]), tonumber(ARGV[4])
local sliding = ARGV[5] == '1'
local first, step = tonumber(ARGV[6]), tonumber(ARGV[7])
local tag = sliding and 'regional_sliding_window' or 'regional_fixed_window'
local peers = #ARGV - 7
local fields = field_names({ 's', 'c', 'p', 't', 'x', 'y' }, 8, 1)
fields[#fields + 1] = 'h'
fields[#fields + 1] = 'r'
local state = read_hash(key, tag, unpack(fields))
local function num(i)
  return tonumber(state[i])
end
local held_at, held_count = 7 + 3 * peers, 8 + 3 * peers

local start = floor_div(now, w) * w
local s, c, p = num(1), num(2) or 0, num(3) or 0
local rolled = true
if s and s >= start then
  -- As stored; a window later than now's (the clock stepped back) stays current.
  start, rolled = s, false
elseif s and s + w == start then
  p, c = c, 0
else
  p, c = 0, 0
end

local others, others_before = 0, 0
for i = 7, 6 + 3 * (#ARGV - 7), 3 do
  local cur, prev = counts_for(num(i), num(i + 1) or 0, num(i + 2) or 0, start, w)
  others, others_before = others + cur, others_before + prev
end
local total, total_before = c + others, p + others_before

local exhausted = num(5) == start
local estimate = total
if sliding then
  -- The same doubles, in the same order, as the sliding window counter.
  local elapsed = math.min(w, math.max(0, now - start))
  estimate = total_before * ((w - elapsed) / w) + total
end
-- The fixed window's quota stays exhausted once announced; the sliding
-- window counter's frees up as the previous window's weight falls, so
-- only the counts decide there.
local allowed = estimate + cost <= limit and not (exhausted and not sliding)
local full = estimate + 1 > limit

-- While a sync this region asked for in this window has not completed, the
-- others may be counting as fast as this region, unseen: it is held to one
-- step past its count when it asked (conservative: it may deny early, never
-- run further ahead of what the others know than a step, however slow or
-- backed up its syncs are).
local held = false
if allowed and num(held_at) == start then
  local since = math.max(0, c - (num(held_count) or 0))
  if since + cost > step then
    allowed, held = false, true
  end
end

-- Tiers: first, then every step; tightened, the same grid below first too.
local offset = (step - first % step) % step
local crossed = false
if allowed then
  local before = c
  c = c + cost
  crossed = (num(4) == start or c >= first)
    and floor_div(c + offset, step) > floor_div(before + offset, step)
end
if allowed or rolled then
  redis.call('HSET', key, 'a', tag, 's', int(start), 'c', int(c), 'p', int(p))
  if crossed and num(held_at) ~= start then
    redis.call('HSET', key, 'h', int(start), 'r', int(c))
  end
  extend(key, start + 2 * w - now)
end

local noticed = 0
if exhausted and num(6) ~= start then
  redis.call('HSET', key, 'y', int(start))
  noticed = 1
end
local sync = crossed or held or (sliding and rolled) or (not allowed and full and not exhausted)
return {
  allowed and 1 or 0, sync and 1 or 0, start, now, c, p, total, total_before,
  exhausted and 1 or 0, noticed, held and 1 or 0,
}
