#!/usr/bin/env bash
# The main job, as far as twinpipe goes today: build GPipe and 1F1B schedules
# for examples/quickstart.json, print them, and verify both.
set -euo pipefail
tp=${1:-build/twinpipe}
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
config=examples/quickstart.json

for schedule in gpipe 1f1b; do
  echo "== twinpipe schedule $config --schedule $schedule"
  "$tp" schedule "$config" --schedule "$schedule" -o "$out/$schedule.txt"
  cat "$out/$schedule.txt"
  echo "== twinpipe verify $out/$schedule.txt"
  "$tp" verify "$out/$schedule.txt"
  echo
done

echo "== a torch.distributed.pipelining schedule (DualPipeV, 4 ranks, 10 micro-batches)"
"$tp" verify ../shared/interop/torch/dualpipev_4rank_10mb.csv || true
echo
echo "== twinpipe partition $config   (cut 26 layers into 4 cells by predicted time)"
"$tp" partition "$config"
for schedule in gpipe 1f1b; do
  echo
  echo "== twinpipe simulate $config --schedule $schedule   (predicted step on 4 H100s over NVLink)"
  "$tp" simulate "$config" --schedule "$schedule" --trace "$out/$schedule.trace.json" --chrome "$out/$schedule.chrome.json"
done
echo
echo "== twinpipe execute examples/mlp_cpu.json   (train an 8-layer MLP on 4 CPU workers, 1F1B, full recompute)"
"$tp" execute examples/mlp_cpu.json --trace "$out/measured.trace.json"
cat <<'TXT'

Traces: pass --trace FILE (twinpipe's JSON) or --chrome FILE (open in
https://ui.perfetto.dev) to `twinpipe simulate`.
What comes next (see the issues): the GPU executor; `compare`, `calibrate`,
`render` and `search` close the loop between prediction and measurement.
TXT
