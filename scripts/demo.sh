#!/usr/bin/env bash
# The main job: plan, predict, run, calibrate, predict again and compare, on
# the CPU backend, for examples/quickstart.json (an 8-layer MLP, 2 stages,
# 8 micro-batches) under GPipe and 1F1B. Files land in out/.
set -euo pipefail
tp=${1:-build/twinpipe}
cd "$(dirname "$0")/.."
config=examples/quickstart.json
out=out
mkdir -p "$out"

for schedule in gpipe 1f1b; do
  echo "== twinpipe schedule $config -s $schedule   (the plan: text form, one line per device)"
  "$tp" schedule "$config" -s "$schedule" -o "$out/$schedule.schedule.txt"
  cut -c1-150 "$out/$schedule.schedule.txt"
  "$tp" verify "$out/$schedule.schedule.txt"
done
echo
echo "== twinpipe partition $config"
"$tp" partition "$config"

echo
echo "== profiling run: twinpipe execute $config -s gpipe --steps 10 (measured trace of the median step)"
"$tp" execute "$config" -s gpipe --steps 10 --seed 7 --trace "$out/profile.trace.json" | tail -3
echo "== twinpipe calibrate $out/profile.trace.json --config $config -s gpipe"
"$tp" calibrate "$out/profile.trace.json" --config "$config" -s gpipe -o "$out/calibration.json"

for schedule in gpipe 1f1b; do
  echo
  echo "== $schedule: predict (uncalibrated and calibrated), run, compare"
  "$tp" simulate "$config" -s "$schedule" --trace "$out/$schedule.uncalibrated.trace.json" | head -1
  "$tp" simulate "$config" -s "$schedule" --calibration "$out/calibration.json" \
      --trace "$out/$schedule.predicted.trace.json" --chrome "$out/$schedule.predicted.chrome.json" | head -1
  "$tp" execute "$config" -s "$schedule" --steps 10 --seed 1 \
      --trace "$out/$schedule.measured.trace.json" --chrome "$out/$schedule.measured.chrome.json" | tail -2
  "$tp" compare "$out/$schedule.predicted.trace.json" "$out/$schedule.measured.trace.json" --json \
      --svg "$out/$schedule.timeline.svg" > "$out/$schedule.comparison.json"
done

echo
echo "== prediction (calibrated) against measurement"
printf '%-8s %10s %10s %8s %8s %8s %10s %10s %8s\n' schedule "pred ms" "meas ms" err "bub pred" "bub meas" "mem pred" "mem meas" err
for schedule in gpipe 1f1b; do
  printf '%-8s ' "$schedule"
  "$tp" compare "$out/$schedule.predicted.trace.json" "$out/$schedule.measured.trace.json" --summary
done
cat <<TXT

Files in $out/: schedules, traces (*.trace.json; open *.chrome.json in
https://ui.perfetto.dev), the calibration, comparisons (*.comparison.json)
and timelines (*.timeline.svg: predicted and measured rows interleaved).
A machine with 2 cores and other work is noisy: run it twice to see.
TXT
