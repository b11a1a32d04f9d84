-- A check counted by outcome (`refund.rs`): the check's reply with the time
-- it recorded at appended, so a refund can find what it counted.
local reply = decide(cost, true)
reply[#reply + 1] = now
return reply
