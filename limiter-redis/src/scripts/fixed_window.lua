-- The fixed window. ARGV: now, cost (or a batch's costs), limit, window.
-- A hash: a = "fixed_window", c = count, s = start of the window (the key's
-- first request).
--
-- A hash algorithm: the functions every one defines, which the drivers call
-- (`hash_decide.lua` for a check or a peek, `hash_batch.lua` for a batch),
-- so a check, its peek and its batch run the same code.
local key = KEYS[1]
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])

-- The state: as stored (nil: none), then as an allowed request brings it,
-- to be written. In the file's locals rather than a table: Redis runs the
-- whole script on every call, and a table costs a call more than these.
local stored_count, stored_start

-- Reads the state; answers whether the key holds another algorithm's state,
-- then the state's fields as a batch answers them (-1: none). Reads only.
local function read_state()
  local stored, foreign = hash_fields(key, 'fixed_window', 'c', 's')
  stored_count, stored_start = tonumber(stored[2]), tonumber(stored[3])
  return foreign, stored_count or -1, stored_start or -1
end

-- Decides a request of `cost` on the state, as a check of its own reading
-- the hash would; an allowed one brings the state up to it, to be written.
-- Answers `allowed`, then what `answer` needs (a batch's client works the
-- reply out itself from the state).
local function step(cost)
  local count, start = stored_count, stored_start
  if not count or now >= start + window then
    count, start = 0, now
  end
  local allowed = count + cost <= limit
  if allowed then
    count = count + cost
    stored_count, stored_start = count, start
  end
  return allowed, count, start
end

-- The reply's 8 values (see `hash_decide.lua`) of the request `step`
-- decided. The whole quota returns at once, when the window ends.
local function answer(_, allowed, count, start)
  local ends_in = start + window - now
  local retry = allowed and -1 or ends_in
  -- A count above the limit was counted under a larger one (a plan changed).
  return allowed and 1 or 0, 0, retry, 0, ends_in, 1, math.max(limit - count, 0), ends_in
end

-- Writes the state; it expires when its window ends. Answers its fields,
-- as `read_state` does.
local function write_state()
  db.call('HSET', key, 'a', 'fixed_window', 'c', int(stored_count), 's', int(stored_start))
  db.call('PEXPIRE', key, ttl_ms(stored_start + window - now))
  return stored_count, stored_start
end
