-- A reset: the key's state is forgotten, whatever algorithm wrote it.
return { redis.call('DEL', KEYS[1]) }
