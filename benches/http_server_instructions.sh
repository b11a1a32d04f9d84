#!/bin/bash
# User-space instructions per HTTP request in the http_load server (hyper,
# tokio, axum and the limiter, all but the kernel), for each of its
# variants, counted by callgrind while wrk loads it over loopback:
# deterministic to about 1% where requests per second on a shared VM are not.
# Each variant is served twice in fresh processes, for a short and a long
# load; the difference in instructions over the difference in requests is
# the per-request count, without start-up. Variants 9 to 11 count by the
# x-api-key header, and wrk sends a new one with every request
# (benches/distinct_keys.lua): nothing coalesces. Run from the workspace root after
#   cargo bench -p limiter-benches --bench http_load --no-run
# with the same CARGO_TARGET_DIR. Needs valgrind, wrk and redis-server.
set -eu
distinct_keys=$(dirname "$0")/distinct_keys.lua
bench=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/http_load-* | grep -v '\.d$' | head -n 1)
out=$(mktemp -d)
redis_port=""
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$out"' EXIT

# A Redis of its own, for the Redis variants, on a free port.
for port in $(seq 21000 21100); do
  if ! (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then redis_port=$port; break; fi
done
[ -n "$redis_port" ] || { echo "no free port in 21000-21100 for redis-server" >&2; exit 1; }
redis-server --port "$redis_port" --save "" --appendonly no --dir "$out" --daemonize yes >/dev/null
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done

# Serves variant $1 under callgrind with wrk loading it for $2 seconds;
# prints "instructions requests".
measure() {
  rm -f "$out"/cg* "$out/ports"
  REDIS_URL="redis://127.0.0.1:$redis_port" valgrind --tool=callgrind --dump-instr=no \
    --callgrind-out-file="$out/cg" "$bench" --serve >"$out/ports" 2>/dev/null &
  local server=$!
  # measure runs in a subshell of its own: the server goes when it ends,
  # even on an error.
  trap "kill $server 2>/dev/null || true" EXIT
  until [ -s "$out/ports" ]; do
    kill -0 "$server" 2>/dev/null || { echo "the server under valgrind exited" >&2; exit 1; }
    sleep 0.2
  done
  local ports=($(cat "$out/ports"))
  local url="http://127.0.0.1:${ports[$1]}/" report
  local load=("$url")
  if [ "$1" -ge 9 ]; then
    # Keys of their own for each run (the variant, the seconds, the time).
    load=(-s "$distinct_keys" "$url" -- "$1.$2.$(date +%s%N)")
  fi
  report=$(wrk -t1 -c16 -d"$2"s "${load[@]}")
  if [[ $report == *Non-2xx* ]]; then
    echo "every request must be allowed: $report" >&2
    exit 1
  fi
  # Dump the counts so far (into cg.1), then stop the server.
  callgrind_control --dump "$server" >/dev/null 2>&1
  kill "$server"
  wait "$server" 2>/dev/null || true
  local total=0 file count
  for file in "$out"/cg.*; do
    count=$(callgrind_annotate "$file" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    total=$((total + ${count:-0}))
  done
  echo "$total $(awk '/requests in/ { print $1 }' <<<"$report")"
}

names=("bare axum" "bare axum + fixed RateLimit fields" "limiter, memory"
  "limiter, memory, no fields on allowed" "tower_governor" "tower_governor + headers"
  "limiter, Redis" "bare EVALSHA" "limiter, Redis, no fields on allowed"
  "limiter, Redis, distinct keys" "bare EVALSHA, distinct keys"
  "limiter, Redis, distinct keys, no fields on allowed")
echo "| server | user-space instructions per request | over bare axum |"
echo "|---|---:|---:|"
bare=""
# Arguments choose the variants (bare axum, 0, first: the others are
# counted over it); none, every one.
for variant in ${*:-0 1 2 3 4 5 6 7 8 9 10 11}; do
  read -r short_total short_requests < <(measure "$variant" 4)
  read -r long_total long_requests < <(measure "$variant" 12)
  per=$(((long_total - short_total) / (long_requests - short_requests)))
  bare=${bare:-$per}
  echo "| ${names[$variant]} | $per | $((per - bare)) |"
done
