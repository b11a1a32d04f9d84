#!/bin/sh
# Instructions per request through each router of the http_in_process bench,
# counted by callgrind: deterministic where timings on a shared VM are not.
# Each variant serves 1,000 and then 11,000 requests in fresh processes; the
# difference over 10,000 is the per-request count, without start-up and
# set-up. The calibration of quanta's clock (once per process, of varying
# length) is subtracted from each run. Run from the workspace root after
#   cargo bench -p limiter-benches --bench http_in_process --no-run
# with the same CARGO_TARGET_DIR. Needs valgrind (Debian package `valgrind`).
set -eu
bench=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/http_in_process-* | grep -v '\.d$' | head -n 1)
out=$(mktemp -d)
instructions() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bench" --requests "$2" "$1" >/dev/null 2>&1
  total=$(callgrind_annotate "$out/cg" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  calibration=$(callgrind_annotate --inclusive=yes "$out/cg" |
    awk '/quanta::Clock::new|quanta::Clock as core::default::Default/ { gsub(",", "", $1); print $1; exit }')
  echo $(( total - ${calibration:-0} ))
}
echo "| router | instructions per request | over bare axum |"
echo "|---|---:|---:|"
bare=""
for variant in bare_axum bare_axum_identity_layer limiter_memory limiter_memory_no_fields limiter_memory_no_fields_global tower_governor tower_governor_headers limiter_layer_on_route tower_governor_on_route; do
  small=$(instructions "$variant" 1000)
  large=$(instructions "$variant" 11000)
  per=$(( (large - small) / 10000 ))
  bare=${bare:-$per}
  echo "| $variant | $per | $(( per - bare )) |"
done
rm -r "$out"
