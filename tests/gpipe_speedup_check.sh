#!/usr/bin/env bash
# gpipe_speedup_check.sh TWINPIPE DIR
# GPipe (Huang et al., NeurIPS 2019), Table 3: normalised training throughput
# on one host of P100 GPUs without NVLink (PCIe), M = 32, K = 2, 4, 8, each
# normalised to K = 2. Each row of DIR/expected.csv names a config, the K = 2
# config it is normalised to and the paper's speed-up; the prediction is
# step(baseline) / step(config) from the uncalibrated catalogue profile.
# Holds every row within 15% of the paper (issue 16).
set -euo pipefail
tp=$1; dir=$2
status=0
step() {
  # A device over its memory still gets its prediction (exit 1 says so).
  { "$tp" simulate "$dir/$1" --json 2>/dev/null || true; } | grep -m1 "\"step_time_s\"" | grep -o "[0-9.e+-]*" | tail -1
}
while IFS=, read -r config baseline paper; do
  [ "$config" = config ] && continue
  t=$(step "$config"); t0=$(step "$baseline")
  [ -n "$t" ] && [ -n "$t0" ] || { echo "$config: no prediction"; status=1; continue; }
  read -r speedup err < <(awk -v t="$t" -v t0="$t0" -v p="$paper" \
    'BEGIN { s = t0 / t; printf "%.3f %.2f\n", s, 100 * (s - p) / p }')
  printf '%-24s step %8.3f s  speed-up over K=2 %5.3f  paper %4.2f  %+6.2f%%\n' "$config" "$t" "$speedup" "$paper" "$err"
  if awk -v e="$err" 'BEGIN { exit !(e > 15 || e < -15) }'; then echo "  outside 15%"; status=1; fi
done < "$dir/expected.csv"
exit $status
