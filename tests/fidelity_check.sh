#!/usr/bin/env bash
# fidelity_check.sh TWINPIPE CONFIG WORKDIR
# The loop of `make demo` with a loose bound (CI machines are shared and
# noisy): profile, calibrate, predict and measure each schedule, then require
# |step time error| <= 100%, |bubble difference| <= 0.5, |peak memory error| <= 10%
# (memory is deterministic; time is not, on a shared 2-core machine).
set -euo pipefail
tp=$1; config=$2; dir=$3
mkdir -p "$dir"
"$tp" execute "$config" -s gpipe --steps 6 --seed 7 --trace "$dir/profile.json" > /dev/null
"$tp" calibrate "$dir/profile.json" --config "$config" -s gpipe -o "$dir/cal.json"
status=0
for schedule in gpipe 1f1b; do
  "$tp" simulate "$config" -s "$schedule" --calibration "$dir/cal.json" --trace "$dir/pred.json" > /dev/null
  "$tp" execute "$config" -s "$schedule" --steps 6 --seed 1 --trace "$dir/meas.json" > /dev/null
  line=$("$tp" compare "$dir/pred.json" "$dir/meas.json" --summary)
  echo "$schedule: $line"
  # fields: pred ms, meas ms, err%, bubble pred, bubble meas, mem pred, mem meas, err%
  echo "$line" | awk -v s="$schedule" '{
    gsub("%", "", $3); gsub("%", "", $8);
    step = $3 < 0 ? -$3 : $3; bubble = $4 - $5; if (bubble < 0) bubble = -bubble; mem = $8 < 0 ? -$8 : $8;
    if (step > 100 || bubble > 0.5 || mem > 10) { print s ": outside the loose bound"; exit 1 }
  }' || status=1
done
exit $status
