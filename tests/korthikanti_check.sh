#!/usr/bin/env bash
# korthikanti_check.sh TWINPIPE DIR
# Korthikanti et al. 2022 (Tables 3 and 5): GPT models of 22B to 1T
# parameters, tensor-parallel 8 on A100-80GB nodes, measured iteration times
# with full recompute and with sequence parallelism + selective recompute.
# Prints each prediction's error and holds issue 18's goal (uncalibrated
# catalogue profile, Megatron's blocking transfers), tighter than the goal
# (mean within 5%, every row within 10%): the mean within 3.5% and every row
# within 6% (the figures traces/published/README.md records).
set -euo pipefail
tp=$1; dir=$2
sum=0; n=0; status=0
while IFS=, read -r config measured; do
  [ "$config" = config ] && continue
  # A device over its memory still gets its prediction (exit 1 says so).
  predicted=$({ "$tp" simulate "$dir/$config" --json 2>/dev/null || true; } | grep -m1 "\"step_time_s\"" | grep -o "[0-9.e+-]*" | tail -1)
  err=$(awk -v p="$predicted" -v m="$measured" 'BEGIN { printf "%.2f", 100 * (p - m) / m }')
  printf '%-22s measured %7.2f s  predicted %8.3f s  %+6.2f%%\n' "$config" "$measured" "$predicted" "$err"
  if awk -v e="$err" 'BEGIN { exit !(e > 6 || e < -6) }'; then echo "  outside 6%"; status=1; fi
  sum=$(awk -v s="$sum" -v e="$err" 'BEGIN { print s + (e < 0 ? -e : e) }'); n=$((n + 1))
done < "$dir/expected.csv"
mean=$(awk -v s="$sum" -v n="$n" 'BEGIN { printf "%.2f", s / n }')
echo "mean absolute error ${mean}% over $n runs"
awk -v m="$mean" 'BEGIN { exit !(m > 3.5) }' && { echo "mean outside 3.5%"; status=1; }
exit $status
