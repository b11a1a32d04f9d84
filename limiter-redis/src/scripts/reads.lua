-- Helpers of the concurrency and lease scripts (and of a store built on
-- this crate), after `helpers.lua`: reads, and expiry.

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

-- The fields of `hash_fields`, from [1] ({} for none), another algorithm's
-- state deleted: it reads as absent, as in the memory store.
local function read_hash(key, algorithm, ...)
  local state, foreign = hash_fields(key, algorithm, ...)
  if foreign then
    db.call('DEL', key)
  end
  if not state[1] then
    return {}
  end
  table.remove(state, 1)
  return state
end

local function expire_in(key, us)
  db.call('PEXPIRE', key, ttl_ms(us))
end
