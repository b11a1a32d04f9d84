-- A peek: what a check would answer now, writing nothing. The algorithm's
-- `decide` runs without its writes, and every Redis call it makes goes
-- through a guard in place of `db` (`prelude.lua`): only the reads a peek
-- needs, of the keys it was given. Anything else is an error raised before
-- it reaches Redis, so a write added to an algorithm one day fails its peek
-- loudly instead of making it write.
local peek_reads = {
  HMGET = true,
  ZCARD = true,
  ZCOUNT = true,
  ZRANGE = true,
  ZRANGEBYSCORE = true,
  ZSCORE = true,
}
local peek_keys = {}
for _, given in ipairs(KEYS) do
  peek_keys[given] = true
end

local function guarded(run)
  return function(command, key, ...)
    local name = type(command) == 'string' and string.upper(command)
    if not (name and peek_reads[name] and peek_keys[key]) then
      error('a peek may not run ' .. tostring(command) .. ' on ' .. tostring(key))
    end
    return run(command, key, ...)
  end
end

-- A table of its own, `redis` left as it is: `db` is `redis` itself until
-- here, and the `redis` table outlives this script.
db = { call = guarded(redis.call), pcall = guarded(redis.pcall) }
return decide(cost, false)
