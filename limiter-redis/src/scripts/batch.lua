
-- Coalesced checks of one key under the sliding log (the hash algorithms
-- loop over their step instead: `loop_open.lua`). The sliding log's file
-- above is the body of `decide(cost)`, unchanged; ARGV[2] holds the costs of k
-- requests in runs, `{cost}x{times}` separated by spaces (as for the hash
-- algorithms: `loop_open.lua`). Each is decided in turn at the same `now`,
-- reading what the one before it wrote, exactly as k calls one after
-- another would be. Reply: the k replies one after the other, each as a
-- single call answers it (the caller splits them by their length).
local replies, r = {}, 0
for cost_text, times in string.gmatch(ARGV[2], '(%d+)x(%d+)') do
  for _ = 1, tonumber(times) do
    local reply = decide(tonumber(cost_text))
    for i = 1, #reply do
      r = r + 1
      replies[r] = reply[i]
    end
  end
end
return replies
