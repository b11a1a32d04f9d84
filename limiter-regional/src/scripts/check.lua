-- A region's check: a fixed window or a sliding window counter, windows
-- aligned to multiples of the window so every region agrees on which window
-- a request belongs to, against this region's lease of the window's quota
-- (its share plus what it received, minus what it gave; see shared.lua).
-- ARGV: now, cost, window, sliding (1/0), this region's share, how long an
-- ask may stay unanswered (µs; 0: no other region to ask), dry (1: a peek,
-- which writes nothing), then the regions' contacts (liveness.rs): reclaim
-- after, lapse, margin (µs; all empty: none kept), the number of other
-- regions, and for each: the part of its share this region would take,
-- when this region last heard from it, this region's last contact with it
-- and when that run began (empty: never), and when each of the other
-- regions (in order, itself left out) last heard from it, as this region
-- last read them (empty: unknown, or never).
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
if ARGV[8] ~= '' then
  -- The regions' quorum (liveness.rs): out of touch with more than half of
  -- the regions, this region gives up its whole share; with more than half
  -- of them (itself and those it reaches that have not heard from a
  -- region either) not having heard from a region for `reclaim`, it takes
  -- its part of that region's share.
  local reclaim, lapse, margin = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local peers = tonumber(ARGV[11])
  local regions, per = peers + 1, 3 + peers
  local reach, out = {}, 0
  for k = 0, peers - 1 do
    local b = 12 + k * per
    local last, since = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
    if out_of_touch(now, v.s, lapse, margin, last, since) then
      out = out + 1
    else
      reach[k] = last ~= nil
    end
  end
  if 2 * out > regions then
    lease = lease - share
  end
  for i = 0, peers - 1 do
    local b = 12 + i * per
    local heard = tonumber(ARGV[b + 1])
    if heard and v.s >= heard + reclaim then
      local quorum, r = 1, 0
      for k = 0, peers - 1 do
        if k ~= i then
          local report = tonumber(ARGV[b + 4 + r])
          r = r + 1
          if reach[k] and report and v.s >= report + reclaim then
            quorum = quorum + 1
          end
        end
      end
      if 2 * quorum > regions then
        lease = lease + tonumber(ARGV[b])
      end
    end
  end
  lease = math.max(0, lease)
end
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
