-- Checks of several keys under one policy, of one cost each, gathered while
-- a call was in flight (`node_batch.rs`), after the algorithm's file (and
-- for the sliding log `sliding_log_keys.lua`): each key is decided in turn by the
-- algorithm's `decide`, its state written, exactly as a check of its own at
-- the same `now` would; the algorithm's file reads its key from `key`, set
-- here for each.
--
-- The keys are not declared: a Cluster runs a script on declared keys of
-- one slot only, and these are the keys of one node, in any of its slots
-- (the script's `allow-cross-slot-keys` flag). They follow the check's
-- arguments, then their count, then '1' when the call went to a node of a
-- Cluster. There each key is first read, and one this node does not serve
-- (its slot moved, or is migrating and the key left) is refused before
-- anything of it is written: its reply is `false` (nil to the caller),
-- which sends it again in a call of its own.
--
-- Reply: each key's reply, as a check of its own answers it.
local count = tonumber(ARGV[#ARGV - 1])
local on_cluster = ARGV[#ARGV] == '1'
local before = #ARGV - 2 - count
local replies = {}
for i = 1, count do
  key = ARGV[before + i]
  if on_cluster and type(db.pcall('EXISTS', key)) == 'table' then
    replies[i] = false
  else
    replies[i] = decide(cost, true)
  end
end
return replies
