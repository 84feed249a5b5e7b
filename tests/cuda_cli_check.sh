#!/usr/bin/env bash
# `execute --backend cuda` on any machine: with a GPU it trains and matches
# the CPU backend's final loss; without one (or without CUDA built in) it
# exits 1 saying why.
set -u
tp=$1 config=$2
out=$("$tp" execute "$config" --backend cuda --steps 3 --json 2>&1)
rc=$?
if [ $rc = 1 ] && echo "$out" | grep -qE 'no CUDA device|built without the CUDA backend'; then
  echo "cuda backend: no GPU, said so: $out"
  exit 0
fi
if [ $rc != 0 ]; then
  echo "cuda backend: exit $rc: $out"
  exit 1
fi
cpu=$("$tp" execute "$config" --steps 3 --json)
python3 - "$out" "$cpu" <<'PY'
import json, sys
gpu, cpu = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rel = abs(gpu["final_loss"] - cpu["final_loss"]) / abs(cpu["final_loss"])
print(f"cuda backend: final loss {gpu['final_loss']:.6f}, cpu {cpu['final_loss']:.6f}, relative {rel:.2e}")
sys.exit(0 if rel < 1e-4 else 1)
PY
