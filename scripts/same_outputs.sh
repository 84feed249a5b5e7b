#!/usr/bin/env bash
# same_outputs.sh OLD_TWINPIPE NEW_TWINPIPE [SRC]
# What a refactor must not change, compared between two builds of twinpipe
# (DESIGN.md's "no behaviour change"): for every config in examples/ and the
# published GPipe and Korthikanti configs, `simulate --json` under the
# config's schedule and under gpipe, 1f1b, auto and zb-h1, the native trace,
# the schedule and `partition --json`; `validate --json` of vTrain's tables,
# uncalibrated and with each recorded calibration; `calibrate --runs` (less
# its commit); and `search` of two examples (less its timing lines). Prints
# each output that differs and exits 1 if any does.
#
#   bash scripts/same_outputs.sh /tmp/base/build/twinpipe build/twinpipe
set -uo pipefail
old=$1; new=$2; src=${3:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run_all() {  # TWINPIPE OUT
  local tp=$1 out=$2 f n s d r c
  mkdir -p "$out"
  cd "$src" || exit 2
  for f in examples/*.json traces/published/korthikanti2022/*.json traces/published/gpipe2019/*.json; do
    n=$(echo "$f" | tr / _)
    { "$tp" simulate "$f" --json; echo "exit $?"; } > "$out/simulate_$n" 2>&1
    { "$tp" partition "$f" --json; echo "exit $?"; } > "$out/partition_$n" 2>&1
    for s in gpipe 1f1b auto zb-h1; do
      { "$tp" simulate "$f" --schedule $s --json; echo "exit $?"; } > "$out/simulate_${s}_$n" 2>&1
    done
    "$tp" simulate "$f" --trace "$out/trace_$n" > /dev/null 2>&1
    "$tp" schedule "$f" > "$out/schedule_$n" 2>&1
  done
  d=traces/published/vtrain-a100
  for r in runs runs_tp runs_layers20 runs_all; do
    "$tp" validate $d/$r.jsonl --json > "$out/validate_$r" 2>&1
    for c in calibration_all calibration_layers12; do
      "$tp" validate $d/$r.jsonl --calibration $d/$c.json --json > "$out/validate_${r}_$c" 2>&1
    done
  done
  "$tp" calibrate --runs $d/runs_layers12.jsonl -o "$out/calibration_layers12" > /dev/null 2>&1
  sed -i '/"commit"/d' "$out/calibration_layers12"
  for f in examples/gpt175b_1024_a100.json examples/transformer_h100.json; do
    "$tp" search "$f" 2>&1 | grep -v "configs/s\|configs in\|configs, " > "$out/search_$(basename "$f")"
  done
}
echo "same_outputs: running $old"; run_all "$old" "$tmp/old"
echo "same_outputs: running $new"; run_all "$new" "$tmp/new"
status=0
for f in "$tmp"/old/*; do
  n=$(basename "$f")
  cmp -s "$f" "$tmp/new/$n" || { echo "differs: $n"; diff "$f" "$tmp/new/$n" | head -6; status=1; }
done
echo "same_outputs: $(ls "$tmp/old" | wc -l) outputs compared, $([ $status = 0 ] && echo all identical || echo some differ)"
exit $status
