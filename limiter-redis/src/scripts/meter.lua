-- The token bucket, the leaky bucket and GCRA: one meter. ARGV: now, cost
-- (or a batch's costs), unit, drain, capacity, kind ("0" the token bucket,
-- "1" the leaky bucket, which answers a delay, "g" GCRA, whose water is how
-- far its theoretical arrival time lies ahead of now).
-- A hash: a = "bucket" (both buckets: the same meter) or "gcra", l = water
-- level in sub-units (a token is `unit` of them), u = when it was last
-- brought up to date, n = the unit it was written in. It drains `drain`
-- sub-units per µs.
--
-- A hash algorithm: the functions every one defines, which the drivers call
-- (`hash_decide.lua` for a check or a peek, `hash_batch.lua` for a batch),
-- so a check, its peek and its batch run the same code.
local key = KEYS[1]
local unit, drain, capacity = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local pacing = ARGV[6] == '1'
local tag = ARGV[6] == 'g' and 'gcra' or 'bucket'
local full = capacity * unit

-- The stored state (nil level: none), as the hash holds it, and whether the
-- key holds another algorithm's state. Reads only.
local function read_state()
  local stored, foreign = hash_fields(key, tag, 'l', 'u', 'n')
  local state = {
    level = tonumber(stored[1]),
    updated = tonumber(stored[2]),
    unit = tonumber(stored[3]) or unit,
  }
  return state, foreign
end

-- Decides a request of `cost` on `state`, as a check of its own reading the
-- hash would; an allowed one brings `state` up to it, to be written. Answers
-- `allowed`, then what `answer` needs (a batch's client works the reply out
-- itself from the state).
local function step(state, cost)
  local level, updated = state.level, state.updated
  if not level then
    level, updated = 0, now
  else
    -- Written under another policy (a plan changed): the same tokens in this
    -- policy's sub-units, a partly drained one counted whole; never more
    -- than this bucket holds (Level::in_units_of).
    if state.unit ~= unit and level > 0 then
      local tokens = ceil_div(level, state.unit)
      level = tokens >= capacity and full or tokens * unit
    end
    level = math.min(level, full)
  end
  if now > updated then
    local elapsed = now - updated
    if elapsed >= ceil_div(level, drain) then
      level = 0
    else
      level = level - elapsed * drain
    end
  end
  local need = cost * unit
  local allowed = level + need <= full
  if allowed then
    level = level + need
    state.level, state.updated, state.unit = level, math.max(now, updated), unit
  end
  return allowed, level, need
end

-- The reply's 8 values (see `helpers.lua`) of the request `step` decided.
local function answer(_, allowed, level, need)
  local retry, delay = -1, 0
  if not allowed then
    retry = ceil_div(level + need - full, drain)
  elseif pacing then
    -- The leaky bucket: it waits for the water ahead of it.
    delay = ceil_div(level - need, drain)
  end
  local remaining = floor_div(full - level, unit)
  -- One token more than remaining fits once the water is that low.
  local available = retry
  if retry < 0 then
    available = level > 0 and ceil_div(level - (full - (remaining + 1) * unit), drain) or 0
  end
  return allowed and 1 or 0, 0, retry, delay, ceil_div(level, drain), 1, remaining, available
end

-- Writes the state; it expires when it has drained.
local function write_state(state)
  db.call('HSET', key, 'a', tag, 'l', int(state.level), 'u', int(state.updated), 'n', int(unit))
  expire_in(key, ceil_div(state.level, drain))
end

-- The state as a batch answers it (-1: none).
local function state_fields(state)
  return { state.level or -1, state.updated or -1, state.unit }
end
