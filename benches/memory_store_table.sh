#!/bin/sh
# Prints the memory-store table of BENCHMARKS.md from criterion's results
# (the slope estimate, the middle number criterion prints after `time:`).
# Run from the workspace root after
#   cargo bench -p limiter-core --bench memory_store
# with the same CARGO_TARGET_DIR. Needs jq.
set -eu
dir="${CARGO_TARGET_DIR:-target}/criterion"
ns() { jq -r '(.slope // .mean).point_estimate' "$dir/$1/new/estimates.json"; }
gov_one=$(ns check/governor_keyed/1)
gov_many=$(ns check/governor_keyed/100000)
echo "| check | 1 key (ns) | × governor | 100,000 keys (ns) | × governor |"
echo "|---|---:|---:|---:|---:|"
for name in governor_keyed gcra gcra_async sliding_log_2_rules fixed_window sliding_window token_bucket leaky_bucket; do
  awk -v name="$name" -v one="$(ns "check/$name/1")" -v many="$(ns "check/$name/100000")" \
    -v g1="$gov_one" -v gn="$gov_many" \
    'BEGIN { printf "| %s | %.1f | %.2f | %.1f | %.2f |\n", name, one, one / g1, many, many / gn }'
done
for name in system_clock_now governor_quanta_clock_now manual_clock_advance validate_cost/gcra \
  validate_cost/sliding_log_2_rules validate_cost/fixed_window; do
  awk -v name="$name" -v t="$(ns "overhead/$name")" \
    'BEGIN { printf "| part: %s | %.1f | | | |\n", name, t }'
done
