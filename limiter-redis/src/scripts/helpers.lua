-- Helpers of the hash and string scripts (every one but the sliding log):
-- whole-number division, integers as text, a TTL, reading a state's hash.
-- A script includes only the files whose functions it calls: Redis runs the
-- whole script on every call, so each function defined costs every call.

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

-- Exact ceil(a / b), the same way (not through `floor_div`: a call costs
-- more than these few lines, and the meter divides a few times a check).
local function ceil_div(a, b)
  local q = math.ceil(a / b)
  if q * b < a then
    q = q + 1
  elseif (q - 1) * b >= a then
    q = q - 1
  end
  return q
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

-- Reads the hash fields of `algorithm`'s state, writing nothing: HMGET's
-- reply, the tag field `a` first and the fields after it (from [2], false
-- when none), and whether the key holds another algorithm's state (another
-- type, or a hash whose tag differs), which a check deletes and a peek
-- reads as absent ({} then).
local function hash_fields(key, algorithm, ...)
  local state = db.pcall('HMGET', key, 'a', ...)
  if state.err then
    return {}, true
  end
  if state[1] and state[1] ~= algorithm then
    return {}, true
  end
  return state, false
end
