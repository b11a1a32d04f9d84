-- The sliding window counter. ARGV: now, cost (or a batch's costs), limit,
-- window.
-- A hash: a = "sliding_window", p = previous window's count, c = current
-- window's, s = its start.
-- The weights are doubles computed in the same order as the Rust code.
--
-- A hash algorithm: the functions every one defines, which the drivers call
-- (`hash_decide.lua` for a check or a peek, `hash_batch.lua` for a batch),
-- so a check, its peek and its batch run the same code.
local key = KEYS[1]
local limit, w = tonumber(ARGV[3]), tonumber(ARGV[4])

-- The state: as stored (nil fields: none), then as an allowed request
-- brings it, to be written, with `stored_expires_in`, when it expires once
-- written. In the file's locals rather than a table: Redis runs the whole
-- script on every call, and a table costs a call more than these.
local stored_previous, stored_current, stored_start, stored_expires_in

-- Reads the state; answers whether the key holds another algorithm's state,
-- then the state's fields as a batch answers them (-1: none). Reads only.
local function read_state()
  local stored, foreign = hash_fields(key, 'sliding_window', 'p', 'c', 's')
  stored_previous, stored_current = tonumber(stored[2]), tonumber(stored[3])
  stored_start = tonumber(stored[4])
  return foreign, stored_previous or -1, stored_current or -1, stored_start or -1
end

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

-- Decides a request of `cost` on the state, as a check of its own reading
-- the hash would; an allowed one brings the state up to it, to be written.
-- Answers `allowed`, then what `answer` needs (a batch's client works the
-- reply out itself from the state).
local function step(cost)
  local start = floor_div(now, w) * w
  local previous, current = stored_previous, stored_current
  if stored_start and stored_start >= start then
    -- As stored; a window later than now's (the clock stepped back) stays current.
    start = stored_start
  elseif stored_start and stored_start + w == start then
    previous, current = current, 0
  else
    previous, current = 0, 0
  end
  local elapsed = math.max(0, now - start)
  local allowed = passes(previous, current, elapsed, cost)
  if allowed then
    current = current + cost
  end
  -- When the counts stop weighing: the state expires then.
  local reset = 0
  if current > 0 then
    reset = start + 2 * w - now
  elseif previous > 0 then
    reset = start + w - now
  end
  if allowed then
    stored_previous, stored_current, stored_start = previous, current, start
    stored_expires_in = reset
  end
  return allowed, previous, current, start, elapsed, reset
end

-- The reply's 8 values (see `hash_decide.lua`) of the request `step` decided.
local function answer(cost, allowed, previous, current, start, elapsed, reset)
  local retry = -1
  if not allowed then
    retry = wait_for(previous, current, cost, start, elapsed)
  end
  local remaining = math.floor(math.max(limit - weighted(previous, current, elapsed), 0))
  -- One more request fits once a request costing one more than what remains passes.
  local available = retry
  if allowed then
    available = remaining < limit
      and wait_for(previous, current, remaining + 1, start, elapsed) or 0
  end
  return allowed and 1 or 0, 0, retry, 0, reset, 1, remaining, available
end

-- Writes the state, with the expiry of the last request allowed. Answers its
-- fields, as `read_state` does.
local function write_state()
  db.call('HSET', key, 'a', 'sliding_window', 'p', int(stored_previous), 'c',
    int(stored_current), 's', int(stored_start))
  db.call('PEXPIRE', key, ttl_ms(stored_expires_in))
  return stored_previous, stored_current, stored_start
end
