-- One request of a hash algorithm (the fixed window, the sliding window, the
-- meter), from the functions its file defines: read the state, step, answer,
-- and, for a check (`writes`), delete another algorithm's state and write
-- the state of an allowed request. The reply, as a table: { allowed (1/0),
-- deciding rule (0-based), retry after (-1 when allowed), delay, reset
-- after, rule count, then for each rule: remaining, available after (when
-- it makes more quota available) }.
local function decide(cost, writes)
  if read_state() and writes then
    db.call('DEL', key)
  end
  local reply = { answer(cost, step(cost)) }
  if writes and reply[1] == 1 then
    write_state()
  end
  return reply
end
