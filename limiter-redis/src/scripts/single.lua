-- One request: the step above decided it and its answer gave the reply's
-- values; its state is written if it was allowed.
if allowed then
  write_state()
end
return { r1, r2, r3, r4, r5, r6, r7, r8 }
