-- Batches of the hash scripts (every one but the sliding log): the key's
-- hash is read from Redis once and kept here, and what the requests write
-- is written once, after the last of them. The algorithm's code runs
-- unchanged: this `redis` shadows Redis's for it, answering HMGET from what
-- the batch read or wrote before, and deferring HSET and PEXPIRE to
-- `flush`, which writes the fields last written, in the order they were
-- first written, and the last expiry. Redis's clock stands still while a
-- script runs, so the deferred PEXPIRE sets the very same expiry.
local real = redis
-- field -> value (false: absent); `order`: the fields written, in order.
local fields, loaded, order, ttl = {}, false, {}, nil
local written = {}

local function hmget(key, ...)
  local names = { ... }
  if not loaded then
    local reply = real.pcall('HMGET', key, ...)
    if type(reply) == 'table' and reply.err then
      return reply
    end
    for i, name in ipairs(names) do
      fields[name] = reply[i]
    end
    loaded = true
  end
  local reply = {}
  for i, name in ipairs(names) do
    if fields[name] == nil then
      fields[name] = real.call('HGET', key, name)
    end
    reply[i] = fields[name]
  end
  return reply
end

local function hset(key, ...)
  for i = 1, select('#', ...), 2 do
    local name, value = select(i, ...)
    if not written[name] then
      written[name] = true
      order[#order + 1] = name
    end
    fields[name] = value
  end
  return 0
end

local function pexpire(key, ms)
  ttl = ms
  return 1
end

-- Another algorithm's state (or another type): deleted at once, as the
-- script alone would.
local function del(key)
  real.call('DEL', key)
  fields, loaded, order, written, ttl = {}, true, {}, {}, nil
  return 1
end

local cached = { HMGET = hmget, HSET = hset, PEXPIRE = pexpire, DEL = del }

local function route(run, command, key, ...)
  local handle = cached[command]
  if handle and key == KEYS[1] then
    return handle(key, ...)
  end
  return run(command, key, ...)
end

local redis = {
  call = function(...) return route(real.call, ...) end,
  pcall = function(...) return route(real.pcall, ...) end,
  flush = function()
    if #order > 0 then
      local args = { 'HSET', KEYS[1] }
      for _, name in ipairs(order) do
        args[#args + 1] = name
        args[#args + 1] = fields[name]
      end
      real.call(unpack(args))
    end
    if ttl then
      real.call('PEXPIRE', KEYS[1], ttl)
    end
  end,
}
