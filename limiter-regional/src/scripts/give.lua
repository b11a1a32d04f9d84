-- Another region asks this one for its spare share of a window: this region
-- gives what it will not need itself (its demand's rate times what is left
-- of the window, see `need`), at most what was asked, taking it off its own
-- lease in the same step, so the two leases never add up to more than they
-- were.
-- ARGV: now, (cost: unused), window, the window's start, sliding (1/0), this
-- region's share, how much is asked, the asking region's name, its count in
-- the window, then this region's contacts as the asker last read them
-- (liveness.rs): lapse and margin (µs; both empty: none kept), `known` or
-- `unknown` (never read), the number of regions, and for each other region
-- this region's last contact with it and when that run began (empty:
-- never). What this region takes of others' shares is never given on: only
-- what it holds for sure.
-- Reply: { given, this region's count in the window }.
local key = KEYS[1]
local w, start = tonumber(ARGV[3]), tonumber(ARGV[4])
local sliding = ARGV[5] == '1'
local share, want = tonumber(ARGV[6]), tonumber(ARGV[7])
local tag = sliding and 'regional_sliding_window' or 'regional_fixed_window'
local state = read_hash(key, tag, unpack(STATE))
if tonumber(state[1]) and tonumber(state[1]) > start then
  -- This region counts in a later window: the asker's is over here.
  return { 0, 0 }
end
local v = rolled_state(state, start, w)
local elapsed = math.min(w, math.max(0, now - start))
local lease = share + v.g
if ARGV[10] ~= '' then
  -- Out of touch with more than half of the regions, or its records never
  -- read by the asker, this region holds only what it was given.
  local lapse, margin = tonumber(ARGV[10]), tonumber(ARGV[11])
  local regions, out = tonumber(ARGV[13]), 0
  for i = 14, #ARGV, 2 do
    if out_of_touch(now, start, lapse, margin, tonumber(ARGV[i]), tonumber(ARGV[i + 1])) then
      out = out + 1
    end
  end
  if ARGV[12] ~= 'known' or 2 * out > regions then
    lease = lease - share
  end
end
local keep = math.ceil(need(v, now, elapsed, w))
local spare = math.floor(math.min(lease - used(v, elapsed, w, sliding), lease - v.c - keep))
local given = math.max(0, math.min(want, spare))
v.g = v.g - given
save(key, tag, v, now, w)
db.call('HSET', key, ARGV[8] .. ':s', int(start), ARGV[8] .. ':c', ARGV[9])
return { given, v.c }
