    wrote = wrote or allowed
  end
end
if wrote then
  write_state()
end
local reply = { now }
for _, field in ipairs(read_state) do
  reply[#reply + 1] = field
end
for _, field in ipairs(state()) do
  reply[#reply + 1] = field
end
return reply
