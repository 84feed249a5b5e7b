#!/bin/bash
# execute --json keeps simulate --json's contract (DESIGN.md section 7) for
# the same config: step_time_s, throughput_samples_per_s, bubble_fraction,
# devices[] with busy_s and peak_memory_bytes, links[] as {src, dst, bytes,
# busy_s} over the same device pairs in the same order carrying the same
# bytes; and step_time_s is the kept step's, the one the trace records.
# Usage: execute_json_check.sh TWINPIPE CONFIG
set -euo pipefail
tp=$1 config=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tp" simulate "$config" --json > "$work/sim.json"
"$tp" execute "$config" --steps 3 --json --trace "$work/trace.json" > "$work/exec.json"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
sim = json.load(open(f"{work}/sim.json"))
run = json.load(open(f"{work}/exec.json"))
trace = json.load(open(f"{work}/trace.json"))
problems = []
for key in ("step_time_s", "throughput_samples_per_s", "bubble_fraction", "devices", "links"):
    if key not in run:
        problems.append(f"execute --json lacks {key}")
if not problems:
    if len(run["devices"]) != len(sim["devices"]):
        problems.append(f"{len(run['devices'])} devices, simulate has {len(sim['devices'])}")
    for d in run["devices"]:
        if not {"device", "busy_s", "peak_memory_bytes"} <= set(d):
            problems.append(f"device entry {d} lacks busy_s or peak_memory_bytes")
        elif not 0 < d["busy_s"] <= run["step_time_s"]:
            problems.append(f"device {d['device']} busy {d['busy_s']} s outside (0, step {run['step_time_s']}]")
    pairs = lambda j: [(l["src"], l["dst"], l["bytes"]) for l in j["links"]]
    if any(set(l) != {"src", "dst", "bytes", "busy_s"} for l in run["links"]):
        problems.append("links[] entries are not {src, dst, bytes, busy_s}")
    elif pairs(run) != pairs(sim):
        problems.append(f"links {pairs(run)} differ from simulate's {pairs(sim)}")
    if not 0 <= run["bubble_fraction"] < 1:
        problems.append(f"bubble_fraction {run['bubble_fraction']}")
    span = max(e["end_s"] for e in trace["events"]) - min(e["start_s"] for e in trace["events"])
    if not span <= run["step_time_s"] * (1 + 1e-9):
        problems.append(f"the trace's step spans {span} s, more than step_time_s {run['step_time_s']}")
    if abs(run["throughput_samples_per_s"] * run["step_time_s"] - sim["throughput_samples_per_s"] * sim["step_time_s"]) > 1e-6:
        problems.append("throughput x step time (the samples per step) differs from simulate's")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("execute --json contract ok")
PY
