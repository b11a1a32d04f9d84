-- A check: one request, decided by the algorithm's `decide`, its state
-- written.
return decide(cost, true)
