-- Lifts ARGV[1]'s block; with KEYS[2] (the notices' version hash), counts
-- the change there.
local lifted = redis.call('HDEL', KEYS[1], ARGV[1])
if KEYS[2] then
  redis.call('HINCRBY', KEYS[2], 'changes', 1)
end
return { lifted }
