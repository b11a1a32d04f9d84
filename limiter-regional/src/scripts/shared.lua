-- Shared by the regional scripts. A region's hash (KEYS[1], the same key in
-- every region) holds, for the window starting at `s` (a multiple of the
-- window):
--   a        the tag: regional_fixed_window or regional_sliding_window;
--   s, c, p  the window's start, this region's count in it and in the
--            window before;
--   g        what this region received from the others (+) or gave them
--            (-) of the window's quota: its lease is its share plus g;
--   d, e     the demand here (requests asked, admitted or not) in the
--            window and in the window before;
--   l        when the last request here came (µs);
--   q        when this region last asked the others for their spare share
--            (µs; an ask of an earlier window is none);
--   z        when an ask last came back empty;
--   {name}:s, {name}:c   what region {name} said its count was, in window
--            {name}:s, when it last gave or asked (for peeks).

-- A region's state at the window starting at `start`: as stored when it is
-- that window or a later one (a clock that stepped back keeps counting in
-- its latest window), rolled forward otherwise. Answers the state and
-- whether it rolled.
local function rolled_state(state, start, w)
  local s = tonumber(state[1])
  local v = {
    s = s, c = tonumber(state[2]) or 0, p = tonumber(state[3]) or 0,
    g = tonumber(state[4]) or 0, d = tonumber(state[5]) or 0,
    e = tonumber(state[6]) or 0, q = tonumber(state[7]) or 0,
    z = tonumber(state[8]) or 0, l = tonumber(state[9]) or 0,
  }
  if s and s >= start then
    return v, false
  end
  if s and s + w == start then
    v.p, v.e = v.c, v.d
  else
    v.p, v.e = 0, 0
  end
  v.s, v.c, v.d, v.g = start, 0, 0, 0
  return v, true
end

local STATE = { 's', 'c', 'p', 'g', 'd', 'e', 'q', 'z', 'l' }

-- What the region still needs this window at `now`: its demand's rate
-- (per µs) over what has passed of the window (over at least a tenth of
-- it; in the first tenth, at least the last window's rate), times what is
-- left. A region quiet for longer than twice its average gap between
-- requests (and a fiftieth of the window) needs nothing more: its traffic
-- stopped or moved, and what it holds is better used where the traffic is.
local function need(v, now, elapsed, w)
  local least = w / 10
  local rate
  if elapsed >= least then
    rate = v.d / elapsed
  else
    rate = math.max(v.e / w, v.d / least)
  end
  if v.d > 0 and elapsed >= least and now - v.l > math.max(2 * elapsed / v.d, w / 50) then
    return 0
  end
  return rate * (w - elapsed)
end

-- What counts against the lease at `elapsed`: the sliding window counter
-- weighs the window before by its overlap, in the same doubles and order
-- as the single-region algorithm; the fixed window counts this window only.
local function used(v, elapsed, w, sliding)
  if sliding then
    return v.p * ((w - elapsed) / w) + v.c
  end
  return v.c
end

local function save(key, tag, v, now, w)
  db.call('HSET', key, 'a', tag, 's', int(v.s), 'c', int(v.c), 'p', int(v.p),
    'g', int(v.g), 'd', int(v.d), 'e', int(v.e), 'q', int(v.q), 'z', int(v.z),
    'l', int(v.l))
  local want = ttl_ms(v.s + 2 * w - now)
  if db.call('PTTL', key) < want then
    db.call('PEXPIRE', key, want)
  end
end

-- Whether a region's records (liveness.rs) say it is out of touch, at
-- `now` for the window starting at `start`, with a region it last reached
-- at `last` (µs; nil: never, which is not out of touch) in a run of
-- heartbeats begun at `since`: the last is older than the lapse, or the run
-- began less than the margin before the window.
local function out_of_touch(now, start, lapse, margin, last, since)
  if not last then
    return false
  end
  return now - last > lapse or since > start - margin
end
