-- The token bucket, the leaky bucket and GCRA: one meter. ARGV: now, cost
-- (or a batch's costs), unit, drain, capacity, kind ("0" the token bucket,
-- "1" the leaky bucket, which answers a delay, "g" GCRA, whose water is how
-- far its theoretical arrival time lies ahead of now).
-- A hash: a = "bucket" (both buckets: the same meter) or "gcra", l = water
-- level in sub-units (a token is `unit` of them), u = when it was last
-- brought up to date, n = the unit it was written in. It drains `drain`
-- sub-units per µs.
--
-- This file reads the stored state into locals; `meter_step.lua` decides
-- one request on them. A check of its own (`single.lua`) runs the step
-- once and answers with `meter_answer.lua`; a batch (`loop_open.lua`)
-- runs the very same step once per request in a loop, and writes the hash
-- once: a batch cannot drift from a check of its own, and costs no
-- function call per request.
local key = KEYS[1]
local unit, drain, capacity = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local pacing = ARGV[6] == '1'
local tag = ARGV[6] == 'g' and 'gcra' or 'bucket'
local full = capacity * unit

-- The stored state (nil level: none), as the hash holds it.
local stored = read_hash(key, tag, 'l', 'u', 'n')
local stored_level, stored_updated = tonumber(stored[1]), tonumber(stored[2])
local stored_unit = tonumber(stored[3]) or unit

-- Writes the stored state; it expires when it has drained.
local function write_state()
  redis.call('HSET', key, 'a', tag, 'l', int(stored_level), 'u', int(stored_updated), 'n', int(unit))
  expire_in(key, ceil_div(stored_level, drain))
end
-- The stored state as a batch answers it (-1: none).
local function state()
  return { stored_level or -1, stored_updated or -1, stored_unit }
end
