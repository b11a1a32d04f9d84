-- One request on the meter (`meter.lua`, then `meter_step.lua`).
if allowed then
  redis.call('HSET', key, 'a', tag, 'l', int(stored_level), 'u', int(stored_updated), 'n', int(unit))
  expire_in(key, ceil_div(stored_level, drain))
end
return { r1, r2, r3, r4, r5, r6, r7, r8 }
