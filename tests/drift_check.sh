#!/usr/bin/env bash
# drift_check.sh PYTHON SRC: the drift recorded beside each GPU's traces
# (traces/recorded/<gpu>/drift.json, what the catalogue's Device::drift
# cites and measured_kernels_test.cc holds it to) is what
# scripts/drift_from_traces.py computes from those traces today.
set -uo pipefail
py=$1 src=$2
status=0
for gpu in h100 h200; do
  if "$py" "$src/scripts/drift_from_traces.py" "$src/traces/recorded/$gpu/loop" --json |
      diff -q - "$src/traces/recorded/$gpu/drift.json" > /dev/null; then
    echo "$gpu: drift.json is the traces' figure"
  else
    echo "$gpu: drift.json differs from scripts/drift_from_traces.py on traces/recorded/$gpu/loop" >&2
    status=1
  fi
done
exit $status
