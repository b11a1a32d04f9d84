#!/bin/sh
# Redis's instructions per decision of the default algorithm's check (the
# sliding log of two rules, 10 per 60 s and 20 per 120 s; keys drawn from
# 100,000, so nearly each a new one, or from 1,000, each checked again
# while its entries last), as the call is sent: EVALSHA of the script the
# store runs; FCALL of the same functions loaded once as a library
# (FUNCTION LOAD), whose per-call values become the library's upvalues;
# FCALL of the script whole as a function's body (what FCALL alone saves);
# one EVALSHA deciding 16 distinct keys in turn, and the same as FCALL; and
# an EVALSHA of a script that does nothing (CALLS=... runs only some). redis-server runs under callgrind for about 5,000 and
# then 15,000 decisions from redis-benchmark -c 4 (312 and 936 calls of 16
# keys); the difference in instructions over the difference in decisions
# is one decision, start-up left out. Deterministic where Redis's
# microseconds per call on a shared VM are not. About 3 minutes. Run from
# the workspace root. Needs valgrind, redis-server (redis-benchmark,
# redis-cli) and python3.
set -eu
scripts=limiter-redis/src/scripts
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Several keys' checks in one call, each decided alone, one after another,
# as the store sends the checks of other keys meeting a call in flight.
{ printf '#!lua flags=allow-cross-slot-keys\n'; cat "$scripts/prelude.lua" "$scripts/sliding_log.lua" "$scripts/sliding_log_keys.lua" \
  "$scripts/keys.lua"; } >"$out/batch.lua"
# A script that does nothing with the same arguments: the cost of any call.
printf '#!lua\nreturn { -1 }\n' >"$out/empty.lua"
# The check as the store sends it: the shebang, the prelude, the log, the driver.
{ printf '#!lua\n'; cat "$scripts/prelude.lua" "$scripts/sliding_log.lua" "$scripts/single.lua"; } >"$out/eval.lua"
# The same functions as a library: what the prelude and the log's first
# lines read from the call becomes the library's upvalues, set by the
# registered function on each call (a library may not reach `redis` or
# `string` while it loads).
python3 - "$scripts/sliding_log.lua" "$out/library.lua" <<'EOF'
import sys
log = open(sys.argv[1]).read()
for per_call in ("local key = KEYS[1]\n",
                 "local format = string.format\n",
                 "local longest, n = tonumber(ARGV[4]), tonumber(ARGV[5])\n"):
    assert per_call in log, per_call
    log = log.replace(per_call, "")
open(sys.argv[2], "w").write("""#!lua name=limiter_measure
local ARGV, key, now, longest, n, format, db
""" + log + """
redis.register_function('sliding_log', function(keys, args)
  key, ARGV, db, format = keys[1], args, redis, string.format
  if args[1] == '' then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  else
    now = tonumber(args[1])
  end
  longest, n = tonumber(args[4]), tonumber(args[5])
  return decide(tonumber(args[2]), true)
end)
""")
EOF

# Each script whole as a function's body (its functions made anew on each
# call, as EVALSHA does): what FCALL itself saves.
python3 - "$scripts" "$out/whole.lua" <<'EOF2'
import sys
d = sys.argv[1]
src = lambda *names: "".join(open(d + "/" + n).read() for n in names)
single = src("prelude.lua", "sliding_log.lua", "single.lua")
batch = src("prelude.lua", "sliding_log.lua", "sliding_log_keys.lua", "keys.lua")
open(sys.argv[2], "w").write("#!lua name=limiter_whole\n"
  + "redis.register_function('whole', function(KEYS, ARGV)\n" + single + "\nend)\n"
  + "redis.register_function{function_name='whole_batch', flags={'allow-cross-slot-keys'},\n"
  + "  callback=function(KEYS, ARGV)\n" + batch + "\nend}\n")
EOF2

# Prints the instructions of a server that answered $2 calls of $1 over $3 keys.
count() {
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    redis-server --port "$port" --save "" --appendonly no >/dev/null 2>&1 &
  server=$!
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
  sha=$(redis-cli -p "$port" script load "$(cat "$out/eval.lua")")
  empty=$(redis-cli -p "$port" script load "$(cat "$out/empty.lua")")
  batch=$(redis-cli -p "$port" script load "$(cat "$out/batch.lua")")
  redis-cli -p "$port" function load "$(cat "$out/library.lua")" >/dev/null
  redis-cli -p "$port" function load "$(cat "$out/whole.lua")" >/dev/null
  # The call's keys, declared, or after the arguments with their count
  # and '-' (not on a Cluster), as the store sends a call of several keys.
  keys="1 key:__rand_int__" after=""
  sixteen="$(printf ' key:__rand_int__%.0s' $(seq 16)) 16 -"
  case $1 in
    empty) call="evalsha $empty" ;;
    evalsha) call="evalsha $sha" ;;
    fcall) call="fcall sliding_log" ;;
    whole) call="fcall whole" ;;
    batch) call="evalsha $batch" keys=0 after=$sixteen ;;
    whole_batch) call="fcall whole_batch" keys=0 after=$sixteen ;;
  esac
  # Each answers as the store reads a check: allowed, with each rule's count.
  [ "$(redis-cli -p "$port" $call $keys "" 1 120000 120000000 2 10 60000000 20 120000000 $after | head -n 1)" = -1 ]
  redis-benchmark -p "$port" -n "$2" -r "$3" -c 4 \
    $call $keys "" 1 120000 120000000 2 10 60000000 20 120000000 $after >/dev/null
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$server" || true
  callgrind_annotate "$out/cg" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

echo "| sent as | decisions a call | per decision, a new key each | 1,000 keys, each checked again |"
echo "|---|---:|---:|---:|"
for call in ${CALLS:-empty evalsha fcall whole batch whole_batch}; do
  decisions=1 calls=5000
  case $call in *batch) decisions=16 calls=312 ;; esac
  row="| $call | $decisions |"
  for keys in 100000 1000; do
    small=$(count "$call" "$calls" "$keys")
    large=$(count "$call" $((3 * calls)) "$keys")
    row="$row $(( (large - small) / (2 * calls) / decisions )) |"
  done
  echo "$row"
done
