#!/bin/sh
# Instructions (and simulated last-level cache misses) per check of the
# memory store beside governor's keyed limiter, counted by callgrind:
# deterministic where timings on a shared VM are not. Each variant runs
# 200,000 and then 400,000 checks in fresh processes; the difference over
# 200,000 is the per-check count, without set-up and first visits. The
# calibration of quanta's clock (once per process, of varying length; both
# limiters read it) is subtracted from each run. Run from
# the workspace root after
#   cargo bench -p limiter-benches --bench memory_instructions --no-run
# with the same CARGO_TARGET_DIR. Needs valgrind (Debian package `valgrind`).
set -eu
bench=${BENCH:-$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/memory_instructions-* | grep -v '\.d$' | head -n 1)}
out=$(mktemp -d)
# Prints "instructions last-level-misses" of one run.
count() {
  valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$out/cg" "$bench" --checks "$2" "$1" >/dev/null 2>&1
  # Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, each with its share in
  # parentheses: the last-level misses are the last three.
  calibration=$(callgrind_annotate --inclusive=yes "$out/cg" |
    awk '/quanta::Clock::new|quanta::Clock as core::default::Default/ { gsub(",", "", $1); print $1; exit }')
  callgrind_annotate "$out/cg" | awk -v calibration="${calibration:-0}" '/PROGRAM TOTALS/ {
    gsub(/\([^)]*\)/, ""); gsub(",", "")
    $0 = $0
    print $1 - calibration, $7 + $8 + $9
  }'
}
echo "| variant | instructions per check | LL misses per check |"
echo "|---|---:|---:|"
# Arguments choose the variants; none, every one.
for variant in ${*:-gcra_1 governor_1 gcra_100k gcra_100k_default_capacity governor_100k log_1 log_100k log_100k_default_capacity}; do
  set -- $(count "$variant" 200000)
  small_ir=$1 small_ll=$2
  set -- $(count "$variant" 400000)
  echo "| $variant | $(( ($1 - small_ir) / 200000 )) | $(awk "BEGIN { x = ($2 - $small_ll) / 200000; printf \"%.1f\", (x < 0 ? 0 : x) }") |"
done
rm -r "$out"
