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

-- The state: as stored (nil level: none), then as an allowed request
-- brings it, to be written. In the file's locals rather than a table: Redis
-- runs the whole script on every call, and a table costs a call more than
-- these.
local stored_level, stored_updated, stored_unit

-- Reads the state; answers whether the key holds another algorithm's state,
-- then the state's fields as a batch answers them (-1: none). Reads only.
local function read_state()
  local stored, foreign = hash_fields(key, tag, 'l', 'u', 'n')
  stored_level, stored_updated = tonumber(stored[2]), tonumber(stored[3])
  stored_unit = tonumber(stored[4]) or unit
  return foreign, stored_level or -1, stored_updated or -1, stored_unit
end

-- Decides a request of `cost` on the state, as a check of its own reading
-- the hash would; an allowed one brings the state up to it, to be written.
-- Answers `allowed`, then what `answer` needs (a batch's client works the
-- reply out itself from the state).
local function step(cost)
  local level, updated = stored_level, stored_updated
  if not level then
    level, updated = 0, now
  else
    -- Written under another policy (a plan changed): the same tokens in this
    -- policy's sub-units, a partly drained one counted whole; never more
    -- than this bucket holds (Level::in_units_of).
    if stored_unit ~= unit and level > 0 then
      local tokens = ceil_div(level, stored_unit)
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
    stored_level, stored_updated, stored_unit = level, math.max(now, updated), unit
  end
  return allowed, level, need
end

-- The reply's 8 values (see `hash_decide.lua`) of the request `step` decided.
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

-- Writes the state; it expires when it has drained. Answers its fields, as
-- `read_state` does.
local function write_state()
  db.call('HSET', key, 'a', tag, 'l', int(stored_level), 'u', int(stored_updated), 'n', int(unit))
  db.call('PEXPIRE', key, ttl_ms(ceil_div(stored_level, drain)))
  return stored_level, stored_updated, stored_unit
end
