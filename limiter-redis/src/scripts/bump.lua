-- Counts one more change of the kind ARGV[1] in the version hash KEYS[1]
-- (every instance polls it: see reconcile.rs).
return { redis.call('HINCRBY', KEYS[1], ARGV[1], 1) }
