#!/usr/bin/env bash
# Runs every libFuzzer harness of a fuzz build for SECONDS each, from its
# checked-in seed corpus (new inputs go to BUILD/corpus/, not the repository),
# and reports the inputs each executed. A crash, leak or timeout fails the run
# and leaves the input in BUILD/crashes/ (add it to fuzz/corpus/<name>/ once fixed).
#   scripts/fuzz.sh build-fuzz 30
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-30}
cd "$(dirname "$0")/.."
failed=0
mkdir -p "$build/crashes"
for harness in "$build"/fuzz/fuzz_*; do
  name=$(basename "$harness"); name=${name#fuzz_}
  mkdir -p "$build/corpus/$name"
  log="$build/fuzz_$name.log"
  if "$harness" "$build/corpus/$name" "fuzz/corpus/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -max_len=65536 -seed=1 -print_final_stats=1 -artifact_prefix="$build/crashes/$name-" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    printf 'fuzz %-14s ok: %s inputs in %s s\n' "$name" "$runs" "$seconds"
  else
    printf 'fuzz %-14s FAILED (log %s):\n' "$name" "$log"
    grep -E 'ERROR|SUMMARY|fuzz check failed|Test unit written' "$log" | head -8 || true
    failed=1
  fi
done
exit $failed
