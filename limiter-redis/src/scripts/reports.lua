-- The live reports of the hash KEYS[1] (see `report.lua`): instance, age
-- in µs and body, flat. Read-only, so Redis runs it while over `maxmemory`:
-- the reports past their time leave when an instance new to the board
-- publishes.
local live = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local at, lasts, body = string.match(all[i + 1], '^(%d+) (%d+) (.*)$')
  if at ~= nil and now - tonumber(at) <= tonumber(lasts) then
    live[#live + 1] = all[i]
    live[#live + 1] = string.format('%d', now - tonumber(at))
    live[#live + 1] = body
  end
end
return live
