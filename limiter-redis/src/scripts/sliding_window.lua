-- The sliding window counter. ARGV: now, cost (or a batch's costs), limit,
-- window.
-- A hash: a = "sliding_window", p = previous window's count, c = current
-- window's, s = its start.
-- The weights are doubles computed in the same order as the Rust code.
--
-- This file reads the stored state into locals; `sliding_window_step.lua`
-- decides one request on them, alone (`single.lua`) or once per request of
-- a batch (`loop_open.lua`): the same text, so they cannot drift.
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
-- The first offset in [from, w] at which a request of cost k passes.
local function first_passing(p, c, from, k)
  local slack = limit - c - k
  local guess = math.ceil(w - slack * w / p)
  local e = math.max(from, math.min(w, guess))
  while e < w and not passes(p, c, e, k) do
    e = e + 1
  end
  while e > from and passes(p, c, e - 1, k) do
    e = e - 1
  end
  return e
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
