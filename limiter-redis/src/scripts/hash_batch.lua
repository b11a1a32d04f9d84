-- Coalesced requests of a hash algorithm: ARGV[2] holds the costs of k
-- requests in runs, `{cost}x{times}` separated by spaces (`1x32`: 32
-- requests costing 1), each request decided in turn at the same `now` by the
-- algorithm's `step` (the very function of its single check) on the state
-- the one before it left, exactly as k calls one after another would be; the
-- state is written once, after the last (Redis's clock stands still while a
-- script runs, so the one PEXPIRE sets the very expiry the last allowed
-- request's would).
--
-- Reply: `now`, the state as read, the state as written (the fields
-- `read_state` and `write_state` answer, -1 for none): a few integers
-- however large the batch. The client replays the batch on the state as
-- read with the algorithm's own code, which answers each request as this
-- step would (the conformance suite holds the two equal), and checks that
-- it comes to the state written.
local as_read, wrote = { read_state() }, false
if as_read[1] then
  db.call('DEL', KEYS[1])
end
for cost_text, times in string.gmatch(ARGV[2], '(%d+)x(%d+)') do
  local request_cost = tonumber(cost_text)
  for _ = 1, tonumber(times) do
    if not step(request_cost) then
      -- Denied: the state is as it was, so every request left in this run
      -- (the same cost, at the same `now`) is denied too.
      break
    end
    wrote = true
  end
end
-- The fields follow whether the key held another algorithm's state in
-- `as_read`, and a placeholder in `as_written`.
local as_written = wrote and { false, write_state() } or as_read
local reply = { now }
for _, fields in ipairs({ as_read, as_written }) do
  for i = 2, #fields do
    reply[#reply + 1] = fields[i]
  end
end
return reply
