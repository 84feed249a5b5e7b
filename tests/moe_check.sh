#!/usr/bin/env bash
# moe_check.sh TWINPIPE DIR: the Grok-1 MoE runs of NVIDIA's DGX Cloud
# recipes (DIR = traces/published/moe-dgx-cloud) held to what
# traces/published/README.md records: the table converts to the committed
# runs, the uncalibrated validation prints the recorded
# validate_uncalibrated.txt byte for byte (a change to the model that moves
# these runs re-records it with scripts/record_published.sh and says why in
# the README), within 15% mean absolute error (issue 41's target; 13.18%
# recorded), and calibrated on them within 8% (issue 41's target; 4.09%
# recorded), with the fit's coefficients inside their ranges.
set -euo pipefail
source "$(dirname "$0")/recorded.sh"
tp=$1; dir=$2
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# From the repository root with the relative path, as the committed runs name their source.
rel=$(realpath --relative-to="$here" "$dir")
(cd "$here" && python3 scripts/published_runs.py "$rel/runs.csv") > "$work/runs.jsonl" 2> /dev/null
cmp "$work/runs.jsonl" "$dir/runs.jsonl"
mae() { sed -n 's/.*mean absolute error \([0-9.]*\)%.*/\1/p' | head -1; }
"$tp" validate "$work/runs.jsonl" > "$work/uncalibrated.txt"
same_as_recorded "uncalibrated validation" "$dir/validate_uncalibrated.txt" "$work/uncalibrated.txt"
uncal=$(mae < "$work/uncalibrated.txt")
"$tp" calibrate --runs "$work/runs.jsonl" -o "$work/cal.json" > "$work/calibrate.txt" 2>&1
cal=$("$tp" validate "$work/runs.jsonl" --calibration "$work/cal.json" | mae)
echo "uncalibrated ${uncal}% (bound 15%), calibrated ${cal}% (bound 8%)"
if grep -q "at its .* bound\|at a bound" "$work/calibrate.txt" && ! grep -q "held at" "$work/calibrate.txt"; then
  echo "a fitted coefficient sits at a bound:"; cat "$work/calibrate.txt"; exit 1
fi
awk -v u="$uncal" -v c="$cal" 'BEGIN { exit !(u != "" && c != "" && u + 0 <= 15 && c + 0 <= 8) }'
