-- Another region asks this one for its spare share of a window: this region
-- gives what it will not need itself (its demand's rate times what is left
-- of the window, see `need`), at most what was asked, taking it off its own
-- lease in the same step, so the two leases never add up to more than they
-- were.
-- ARGV: now, (cost: unused), window, the window's start, sliding (1/0), this
-- region's share, how much is asked, the asking region's name, its count in
-- the window.
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
local keep = math.ceil(need(v, now, elapsed, w))
local spare = math.floor(math.min(lease - used(v, elapsed, w, sliding), lease - v.c - keep))
local given = math.max(0, math.min(want, spare))
v.g = v.g - given
save(key, tag, v, now, w)
db.call('HSET', key, ARGV[8] .. ':s', int(start), ARGV[8] .. ':c', ARGV[9])
return { given, v.c }
