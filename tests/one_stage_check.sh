#!/bin/bash
# one_stage_check.sh TWINPIPE CONFIG STEPS
# A pipelined config trains as its one-stage twin does (GPipe's guarantee):
# CONFIG as written (K stages on K devices) and with "stages" and "devices"
# set to 1 end STEPS steps with the same loss, to 1e-5 relative, every step.
set -euo pipefail
tp=$1 config=$2 steps=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -E -e 's/"stages": *[0-9]+/"stages": 1/' -e 's/"devices": *[0-9]+/"devices": 1/' "$config" > "$work/one.json"
"$tp" execute "$config" --steps "$steps" --json > "$work/k.json"
"$tp" execute "$work/one.json" --steps "$steps" --json > "$work/one_stage.json"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
k = json.load(open(f"{work}/k.json"))["losses"]
one = json.load(open(f"{work}/one_stage.json"))["losses"]
worst = max(abs(a - b) / abs(b) for a, b in zip(k, one))
if len(k) != len(one) or worst > 1e-5:
    print(f"losses differ (worst relative {worst:.3g}): pipelined {k}, one stage {one}")
    sys.exit(1)
print(f"same loss as one stage over {len(k)} steps (worst relative difference {worst:.3g})")
PY
