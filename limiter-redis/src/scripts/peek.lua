-- A peek: what the algorithm's script would answer now, writing nothing.
-- Its code runs unchanged after this file: this `redis` shadows Redis's
-- for it, passing reads through and answering writes without making them.
-- What a later read would have seen of those writes is kept here:
-- - a trim of the sliding log (ZREMRANGEBYSCORE up to `trimmed`): ZCARD
--   counts, and ZRANGE finds, only the entries after it;
-- - a DEL (another algorithm's state): the key then reads as absent;
-- - ZADD answers that every entry and the marker were added, as on a log
--   with nothing at or after now (the marker is always ahead of a trim).
local real = redis
local trimmed, gone = nil, false

local function zremrangebyscore(run, key, _, max)
  local reply = run('ZCARD', key)
  if type(reply) == 'table' and reply.err then
    return reply
  end
  trimmed = max
  return 0
end

local function zcard(run, key)
  if gone then
    return 0
  end
  if trimmed then
    return run('ZCOUNT', key, '(' .. trimmed, '+inf')
  end
  return run('ZCARD', key)
end

local function zrange(run, key, start, stop, ...)
  if gone then
    return {}
  end
  if trimmed then
    return run('ZRANGEBYSCORE', key, '(' .. trimmed, '+inf', 'WITHSCORES', 'LIMIT', start, 1)
  end
  return run('ZRANGE', key, start, stop, ...)
end

-- What ZADD GT CH would count: every entry, and the marker unless it is at
-- or after now already.
local function zadd(run, key, ...)
  local entries = (select('#', ...) - 4) / 2
  local marker = not gone and tonumber(run('ZSCORE', key, '~'))
  if marker and marker >= now then
    return entries
  end
  return entries + 1
end

local function del()
  gone = true
  return 1
end

local function written()
  return 0
end

local function absent(run, command, key, ...)
  if not gone then
    return run(command, key, ...)
  end
  if command == 'HMGET' then
    return {}
  end
  if command == 'ZCOUNT' then
    return 0
  end
  if command == 'ZRANGEBYSCORE' then
    return {}
  end
  return false
end

local handlers = {
  ZREMRANGEBYSCORE = zremrangebyscore,
  ZCARD = zcard,
  ZRANGE = zrange,
  ZADD = zadd,
  DEL = del,
  HSET = written,
  PEXPIRE = written,
}

local function route(run, command, key, ...)
  if key ~= KEYS[1] then
    return run(command, key, ...)
  end
  local handle = handlers[command]
  if handle then
    return handle(run, key, ...)
  end
  return absent(run, command, key, ...)
end

local redis = {
  call = function(...) return route(real.call, ...) end,
  pcall = function(...) return route(real.pcall, ...) end,
}
