-- A notice on the channel named as the key (in a Cluster, the node serving
-- that name's slot: where every instance subscribes). Answers how many
-- subscribers received it.
return { redis.call('PUBLISH', KEYS[1], ARGV[1]) }
