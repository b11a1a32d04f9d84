-- The fixed window. ARGV: now, cost (or a batch's costs), limit, window.
-- A hash: a = "fixed_window", c = count, s = start of the window (the key's
-- first request).
--
-- This file reads the stored state into locals; `fixed_window_step.lua`
-- decides one request on them, alone (`single.lua`, answering with
-- `fixed_window_answer.lua`) or once per request of a batch (`loop_open.lua`):
-- the same text, so they cannot drift.
local key = KEYS[1]
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
local stored = read_hash(key, 'fixed_window', 'c', 's')
local stored_count, stored_start = tonumber(stored[1]), tonumber(stored[2])

-- Writes the stored state; it expires when its window ends.
local function write_state()
  redis.call('HSET', key, 'a', 'fixed_window', 'c', int(stored_count), 's', int(stored_start))
  expire_in(key, stored_start + window - now)
end
-- The stored state as a batch answers it (-1: none).
local function state()
  return { stored_count or -1, stored_start or -1 }
end
