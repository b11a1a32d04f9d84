-- A region's check: a fixed window or a sliding window counter, windows
-- aligned to multiples of the window so every region agrees on which window
-- a request belongs to, against this region's lease of the window's quota
-- (its share plus what it received, minus what it gave; see shared.lua).
-- ARGV: now, cost, window, sliding (1/0), this region's share, how long an
-- ask may stay unanswered (µs; 0: no other region to ask), dry (1: a peek,
-- which writes nothing).
-- Reply: { allowed, how much to ask the others for (0: none), window start,
-- now, this region's count before this request, its count in the window
-- before, its lease, an ask is out (1/0) }.
local key = KEYS[1]
local w = tonumber(ARGV[3])
local sliding = ARGV[4] == '1'
local share, ask_timeout = tonumber(ARGV[5]), tonumber(ARGV[6])
local dry = ARGV[7] == '1'
local tag = sliding and 'regional_sliding_window' or 'regional_fixed_window'
local v = rolled_state(read_hash(key, tag, unpack(STATE)), floor_div(now, w) * w, w)
local elapsed = math.min(w, math.max(0, now - v.s))
local lease = share + v.g
local counted = used(v, elapsed, w, sliding)
local allowed = counted + cost <= lease
local before = v.c
if dry then
  local out = v.q >= v.s and now - v.q < ask_timeout
  return { allowed and 1 or 0, 0, v.s, now, before, v.p, lease, out and 1 or 0 }
end

v.d, v.l = v.d + cost, now
if allowed then
  v.c = v.c + cost
end
-- Ask the others for what this region will need beyond its lease by the
-- window's end, or for the room another request like this one needs now
-- (the sliding window counter's previous window may hold the lease), once
-- it has used half of its lease (or was short, or needed more than its
-- share last window): a key with a few requests a window never asks.
local after = used(v, elapsed, w, sliding)
local want = math.ceil(math.max(need(v, now, elapsed, w) - (lease - v.c), after + cost - lease))
local ask = 0
local out = v.q >= v.s and now - v.q < ask_timeout
if ask_timeout > 0 and want > 0 and not out and (not allowed or 2 * after >= lease or v.e > share) then
  -- An ask that came back empty is not repeated within a tenth of the window.
  if not (v.z >= v.s and now - v.z < w / 10) then
    ask, v.q, out = want, now, true
  end
end
save(key, tag, v, now, w)
return { allowed and 1 or 0, ask, v.s, now, before, v.p, lease, out and 1 or 0 }
