-- Checks of several keys under one policy, of one cost each, gathered while
-- a call was in flight (`node_batch.rs`), after the algorithm's file (and
-- for the sliding log `sliding_log_keys.lua`): each key is decided in turn by the
-- algorithm's `decide`, its state written, exactly as a check of its own at
-- the same `now` would; the algorithm's file reads its key from `key`, set
-- here for each. Reply: each key's reply, as a check of its own answers it.
local replies = {}
for i = 1, #KEYS do
  key = KEYS[i]
  replies[i] = decide(cost, true)
end
return replies
