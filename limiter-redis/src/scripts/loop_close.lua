  wrote = wrote or allowed
  replies[at + 1], replies[at + 2], replies[at + 3], replies[at + 4] = r1, r2, r3, r4
  replies[at + 5], replies[at + 6], replies[at + 7], replies[at + 8] = r5, r6, r7, r8
  at = at + 8
end
if wrote then
  write_state()
end
return replies
