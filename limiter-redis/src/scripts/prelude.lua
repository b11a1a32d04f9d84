-- Shared by every script. Times are microseconds; every number is an integer
-- below 2^53, so Lua's doubles hold it exactly.
--
-- Redis turns every Lua number passed to redis.call into text with a costly
-- "%.17g", so the sliding log (the default, and the costliest) passes text
-- and formats each number once.

-- ARGV[1] is empty in production: the time is the Redis server's, so
-- application clocks never matter. Tests may pass a timestamp instead.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])

-- The algorithms and the helpers reach Redis through `db` (its `call` and
-- `pcall`), never `redis` itself, so that a peek (`peek.lua`) can put a
-- guard in its place that lets only reads through. Elsewhere it is `redis`:
-- a table of its own would cost every call.
local db = redis
