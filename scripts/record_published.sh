#!/usr/bin/env bash
# record_published.sh TWINPIPE: regenerate every recorded output under
# traces/published/ (what traces/published/README.md quotes) with this
# build, after a change to the cost model: vTrain's validations and
# calibrations, the DGX Cloud dense and MoE tables (validations, fits, FP8
# ratios, pictures) and the transfer table. The README's figures are then
# updated by hand from the first line of each file (and `git diff` shows
# what moved). Takes about 5 minutes on 2 cores.
#
#   bash scripts/record_published.sh build/twinpipe
set -euo pipefail
tp=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

step "vtrain-a100"
(
  cd traces/published/vtrain-a100
  "$tp" validate runs.jsonl > validate_uncalibrated.txt
  "$tp" validate runs_layers12.jsonl > validate_layers12_uncalibrated.txt
  "$tp" validate runs_tp.jsonl > validate_tp_uncalibrated.txt
  "$tp" calibrate --runs runs_layers12.jsonl -o calibration_layers12.json > /dev/null 2>&1
  "$tp" calibrate --runs runs_layers12.jsonl --keep-bounds -o calibration_layers12_keep_bounds.json > /dev/null 2>&1
  "$tp" calibrate --runs runs_all.jsonl -o calibration_all.json > /dev/null 2>&1
  "$tp" calibrate --runs runs_all.jsonl --keep-bounds -o calibration_all_keep_bounds.json > /dev/null 2>&1
  for pair in "layers12 runs_layers12" "layers20 runs_layers20"; do
    set -- $pair
    "$tp" validate "$2.jsonl" --calibration calibration_layers12.json > "validate_$1_calibrated.txt" 2> /dev/null
    "$tp" validate "$2.jsonl" --calibration calibration_layers12_keep_bounds.json \
      > "validate_$1_calibrated_keep_bounds.txt" 2> /dev/null
  done
  "$tp" validate runs_all.jsonl --calibration calibration_all.json > validate_all_calibrated.txt 2> /dev/null
  "$tp" validate runs_all.jsonl --calibration calibration_all_keep_bounds.json \
    > validate_all_calibrated_keep_bounds.txt 2> /dev/null
  "$tp" validate runs_tp.jsonl --calibration calibration_layers12.json > validate_tp_calibrated_layers12_tp1.txt 2> /dev/null
  "$tp" validate runs_tp.jsonl --calibration calibration_all.json > validate_tp_calibrated_all.txt 2> /dev/null
  "$tp" validate runs_tp.jsonl --calibration calibration_all_keep_bounds.json \
    > validate_tp_calibrated_all_keep_bounds.txt 2> /dev/null
)

# The DGX Cloud tables, named from the repository root as their runs are.
for name in h100-dgx-cloud moe-dgx-cloud; do
  step "$name"
  d=traces/published/$name
  "$tp" validate "$d/runs.jsonl" > "$d/validate_uncalibrated.txt"
  if [[ -f "$d/calibrate.txt" ]]; then
    "$tp" calibrate --runs "$d/runs.jsonl" -o "$d/calibration_all.json" > "$d/calibrate.txt" 2>&1
  else
    "$tp" calibrate --runs "$d/runs.jsonl" -o "$d/calibration_all.json" > /dev/null 2>&1
  fi
  "$tp" validate "$d/runs.jsonl" --calibration "$d/calibration_all.json" > "$d/validate_calibrated.txt" 2> /dev/null
  python3 scripts/validation_png.py "$tp" "$d/runs.jsonl" --calibration "$d/calibration_all.json" \
    -o "$d/validation.png" > /dev/null
done
d=traces/published/h100-dgx-cloud
python3 scripts/fp8_ratio.py "$tp" "$d/runs.jsonl" > "$d/fp8_ratio_uncalibrated.txt"
python3 scripts/fp8_ratio.py "$tp" "$d/runs.jsonl" --calibration "$d/calibration_all.json" > "$d/fp8_ratio_calibrated.txt"

step "heldout-dgx-cloud"
d=traces/published/heldout-dgx-cloud
python3 scripts/published_runs.py --bias no "$d/runs.csv" > "$d/runs.jsonl" 2> /dev/null
"$tp" validate "$d/runs.jsonl" > "$d/validate_uncalibrated.txt"
"$tp" validate "$d/runs.jsonl" --calibration traces/published/h100-dgx-cloud/calibration_all.json \
  > "$d/validate_calibrated_h100.txt" 2> /dev/null
python3 scripts/fp8_ratio.py "$tp" "$d/runs.jsonl" > "$d/fp8_ratio_uncalibrated.txt"
python3 scripts/fp8_ratio.py "$tp" "$d/runs.jsonl" --calibration traces/published/h100-dgx-cloud/calibration_all.json \
  > "$d/fp8_ratio_calibrated_h100.txt"
python3 scripts/validation_png.py "$tp" "$d/runs.jsonl" --calibration traces/published/h100-dgx-cloud/calibration_all.json \
  -o "$d/validation.png" > /dev/null

step "transfer table"
python3 scripts/transfer_table.py "$tp" traces/published -o traces/published/transfer \
  > traces/published/transfer/table.md
step "done"
