-- One request of a hash algorithm (the fixed window, the sliding window, the
-- meter), from the functions its file defines: read the state, step, answer,
-- and, for a check (`writes`), delete another algorithm's state and write
-- the state of an allowed request. The reply's 8 values, as a table.
local function decide(cost, writes)
  local state, foreign = read_state()
  if foreign and writes then
    db.call('DEL', KEYS[1])
  end
  local reply = { answer(cost, step(state, cost)) }
  if writes and reply[1] == 1 then
    write_state(state)
  end
  return reply
end
