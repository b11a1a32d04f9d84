-- The sliding window counter. ARGV: now, cost, limit, window.
-- A hash: a = "sliding_window", p = previous window's count, c = current
-- window's, s = its start.
-- The weights are doubles computed in the same order as the Rust code.
local key = KEYS[1]
local limit, w = tonumber(ARGV[3]), tonumber(ARGV[4])
local start = floor_div(now, w) * w
local state = read_hash(key, 'sliding_window', 'p', 'c', 's')
local previous, current, stored = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
if stored and stored >= start then
  -- As stored; a window later than now's (the clock stepped back) stays current.
  start = stored
elseif stored and stored + w == start then
  previous, current = current, 0
else
  previous, current = 0, 0
end
local elapsed = math.max(0, now - start)

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
-- The exact wait until a request of cost k passes.
local function wait_for(p, c, k)
  if c + k <= limit then
    return start + first_passing(p, c, elapsed + 1, k) - now
  end
  return start + w + first_passing(c, 0, 0, k) - now
end

local retry = -1
if passes(previous, current, elapsed, cost) then
  current = current + cost
  redis.call('HSET', key, 'a', 'sliding_window', 'p', int(previous), 'c', int(current), 's', int(start))
else
  retry = wait_for(previous, current, cost)
end

local reset = 0
if current > 0 then
  reset = start + 2 * w - now
elseif previous > 0 then
  reset = start + w - now
end
if retry < 0 then
  expire_in(key, reset)
end
local remaining = math.floor(math.max(limit - weighted(previous, current, elapsed), 0))
-- One more request fits once a request costing one more than what remains passes.
local available = retry
if retry < 0 then
  available = remaining < limit and wait_for(previous, current, remaining + 1) or 0
end
return { retry < 0 and 1 or 0, 0, retry, 0, reset, 1, remaining, available }
