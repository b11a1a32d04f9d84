-- The sliding window counter. ARGV: now, cost (or a batch's costs), limit,
-- window.
-- A hash: a = "sliding_window", p = previous window's count, c = current
-- window's, s = its start.
-- The weights are doubles computed in the same order as the Rust code.
--
-- This file reads the stored state into locals; `sliding_window_step.lua`
-- decides one request on them, alone (`single.lua`, answering with
-- `sliding_window_answer.lua`) or once per request of a batch (`loop_open.lua`):
-- the same text, so they cannot drift.
local key = KEYS[1]
local limit, w = tonumber(ARGV[3]), tonumber(ARGV[4])
local stored = read_hash(key, 'sliding_window', 'p', 'c', 's')
local stored_previous, stored_current, stored_start =
  tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
-- When the stored state expires, once written.
local expires_in

local function weighted(p, c, e)
  return p * ((w - e) / w) + c
end
local function passes(p, c, e, k)
  return weighted(p, c, e) + k <= limit
end
-- The first offset in [from, w] at which a request of cost k passes (at w
-- it always does). From the linear estimate's solution, the search gallops,
-- then halves, as the Rust code does: where doubles cannot tell one
-- microsecond's weight from none (huge limits), a step at a time would walk
-- the whole window inside Redis's one thread.
local function first_passing(p, c, from, k)
  local slack = limit - c - k
  local guess = math.ceil(w - slack * w / p)
  guess = math.max(from, math.min(w, guess))
  -- The answer lies in [lo, hi], and hi passes.
  local lo, hi, step = from, w, 1
  if passes(p, c, guess, k) then
    hi = guess
    while hi > lo do
      local probe = math.max(hi - step, lo)
      if not passes(p, c, probe, k) then
        lo = probe + 1
        break
      end
      hi = probe
      step = step * 2
    end
  else
    lo = guess + 1
    while lo < hi do
      local probe = math.min(guess + step, hi)
      if passes(p, c, probe, k) then
        hi = probe
        break
      end
      lo = probe + 1
      step = step * 2
    end
  end
  while lo < hi do
    local mid = lo + math.floor((hi - lo) / 2)
    if passes(p, c, mid, k) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return hi
end
-- The exact wait until a request of cost k passes, in the window starting
-- at `start`, `elapsed` into it.
local function wait_for(p, c, k, start, elapsed)
  if c + k <= limit then
    return start + first_passing(p, c, elapsed + 1, k) - now
  end
  return start + w + first_passing(c, 0, 0, k) - now
end

-- Writes the stored state, with the expiry of the last request written.
local function write_state()
  redis.call('HSET', key, 'a', 'sliding_window', 'p', int(stored_previous), 'c',
    int(stored_current), 's', int(stored_start))
  expire_in(key, expires_in)
end
-- The stored state as a batch answers it (-1: none).
local function state()
  return { stored_previous or -1, stored_current or -1, stored_start or -1 }
end
