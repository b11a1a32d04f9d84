-- Before `keys.lua`, for the sliding log (after `sliding_log.lua`): what
-- each key's check reads alike is read once for all the keys of the call:
-- the rules' numbers (each argument turned into a number, which `tonumber`
-- then returns as it is), and the bounds `sliding_log.lua` takes as text.
for i = 4, 5 + 2 * n do
  ARGV[i] = tonumber(ARGV[i])
end
texts = { trim = format('%d', now - longest), now = format('%d', now) }
for i = 1, n do
  texts[i] = format('(%d', now - ARGV[5 + 2 * i])
end
