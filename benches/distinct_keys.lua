-- wrk script: every request carries an x-api-key of its own, so a limiter
-- counting by that header sees each key once and nothing coalesces.
--   wrk -s benches/distinct_keys.lua URL -- PREFIX
-- The keys are PREFIX.THREAD.N (N counting the thread's requests); give
-- each run a prefix of its own so runs do not repeat each other's keys.

local threads = 0

-- Numbers each thread (runs in the main Lua state, once a thread).
function setup(thread)
  threads = threads + 1
  thread:set("thread_number", threads)
end

local prefix
local sent = 0

function init(args)
  prefix = (args[1] or tostring(os.time())) .. "." .. thread_number .. "."
end

function request()
  sent = sent + 1
  wrk.headers["x-api-key"] = prefix .. sent
  return wrk.format()
end
