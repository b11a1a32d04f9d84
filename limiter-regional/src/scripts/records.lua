-- A region's heartbeat records (see contacts.lua) as one reply: the number
-- of contacts fields, the contacts hash, the heard hash (as HGETALL
-- answers them).
local function records(contacts_key, heard_key)
  local contacts = db.call('HGETALL', contacts_key)
  local heard = db.call('HGETALL', heard_key)
  local reply = { tostring(#contacts) }
  for _, v in ipairs(contacts) do
    reply[#reply + 1] = v
  end
  for _, v in ipairs(heard) do
    reply[#reply + 1] = v
  end
  return reply
end
