#!/usr/bin/env bash
# drift_check.sh PYTHON SRC: the drift recorded beside each GPU's traces
# (traces/recorded/<gpu>/drift.json, what the catalogue's Device::drift
# cites and measured_kernels_test.cc holds it to) is what
# scripts/drift_from_traces.py computes from those traces today: the same
# rows, every figure within 1e-12 relative (Python's statistics may differ
# in the last digit between versions).
set -uo pipefail
py=$1 src=$2
status=0
for gpu in h100 h200; do
  if "$py" "$src/scripts/drift_from_traces.py" "$src/traces/recorded/$gpu/loop" --json |
      "$py" -c '
import json, math, sys
now, recorded = json.load(sys.stdin), json.load(open(sys.argv[1]))
def same(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)
    return a == b
sys.exit(0 if same(now, recorded) else 1)' "$src/traces/recorded/$gpu/drift.json"; then
    echo "$gpu: drift.json is the traces' figure"
  else
    echo "$gpu: drift.json differs from scripts/drift_from_traces.py on traces/recorded/$gpu/loop" >&2
    status=1
  fi
done
exit $status
