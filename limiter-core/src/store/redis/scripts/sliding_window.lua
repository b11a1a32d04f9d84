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
local function passes(p, c, e)
  return weighted(p, c, e) + cost <= limit
end
local function first_passing(p, c, from)
  local slack = limit - c - cost
  local guess = math.ceil(w - slack * w / p)
  local e = math.max(from, math.min(w, guess))
  while e < w and not passes(p, c, e) do
    e = e + 1
  end
  while e > from and passes(p, c, e - 1) do
    e = e - 1
  end
  return e
end

local retry = -1
if passes(previous, current, elapsed) then
  current = current + cost
  redis.call('HSET', key, 'a', 'sliding_window', 'p', int(previous), 'c', int(current), 's', int(start))
elseif current + cost <= limit then
  retry = start + first_passing(previous, current, elapsed + 1) - now
else
  retry = start + w + first_passing(current, 0, 0) - now
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
return { retry < 0 and 1 or 0, 0, retry, 0, 1, remaining, reset }
