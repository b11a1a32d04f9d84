-- This region's contacts with the others, and when it last heard from
-- each, in this region's Redis:
--   {limiter:regions}:contacts  name -> "last,since": when a heartbeat of
--       this region to that one last went out and came back (µs, this
--       Redis's clock, the time it was sent), and when the run of such
--       heartbeats without a gap longer than `lapse` began (0: never broken);
--   {limiter:regions}:heard     name -> when that region's heartbeat last
--       reached this Redis (its clock).
-- KEYS: the contacts hash, the heard hash.
-- ARGV: (now: unused), (cost: unused), lapse (µs), then pairs of a region
-- this region's heartbeat just reached and how long ago it was sent (µs).
-- Reply: this region's records, as updated (records.lua).
local lapse = tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  local sent = now - tonumber(ARGV[i + 1])
  local last, since
  local held = db.call('HGET', KEYS[1], ARGV[i])
  if held then
    local l, s = string.match(held, '^(%d+),(%d+)$')
    last, since = tonumber(l), tonumber(s)
  end
  if not last then
    since = 0
  elseif sent - last > lapse then
    since = sent
  end
  if not last or sent > last then
    last = sent
  end
  db.call('HSET', KEYS[1], ARGV[i], int(last) .. ',' .. int(since))
end
return records(KEYS[1], KEYS[2])
