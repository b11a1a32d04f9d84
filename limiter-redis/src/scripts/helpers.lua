-- Helpers of the hash and string scripts (every one but the sliding log).
--
-- Reply: { allowed (1/0), deciding rule (0-based), retry after (-1 when
-- allowed), delay, reset after, rule count, then for each rule: remaining,
-- available after (when it makes more quota available) }.

-- Exact floor(a / b) for 0 <= a, 0 < b below 2^52: the double quotient may
-- round across an integer, so step back or forward by one.
local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function ceil_div(a, b)
  return floor_div(a + b - 1, b)
end

-- An integer as Redis should store it (tostring would round to 14 digits).
local function int(n)
  return string.format('%d', n)
end

local injected = ARGV[1] ~= ''

-- A key's TTL in ms: the state expires when it means the same as no state.
-- With a caller's timestamp, Redis's own clock does not follow that time, so
-- the TTL (garbage collection only) is padded by a minute.
local function ttl_ms(us)
  if injected then
    us = us + 60000000
  end
  return math.max(1, ceil_div(us, 1000))
end

-- Runs a read; a key holding another algorithm's state (WRONGTYPE) is
-- deleted and reads as absent, as in the memory store.
local function read(...)
  local reply = db.pcall(...)
  if type(reply) == 'table' and reply.err then
    db.call('DEL', KEYS[1])
    return false
  end
  return reply
end

-- Reads the hash fields of `algorithm`'s state, writing nothing: the
-- fields ({} for none), and whether the key holds another algorithm's state
-- (another type, or a hash whose tag field `a` differs), which a check
-- deletes and a peek reads as absent.
local function hash_fields(key, algorithm, ...)
  local state = db.pcall('HMGET', key, 'a', ...)
  if state.err then
    return {}, true
  end
  if not state[1] then
    return {}, false
  end
  if state[1] ~= algorithm then
    return {}, true
  end
  table.remove(state, 1)
  return state, false
end

-- `hash_fields`, another algorithm's state deleted: it reads as absent, as
-- in the memory store.
local function read_hash(key, algorithm, ...)
  local state, foreign = hash_fields(key, algorithm, ...)
  if foreign then
    db.call('DEL', key)
  end
  return state
end

local function expire_in(key, us)
  db.call('PEXPIRE', key, ttl_ms(us))
end
