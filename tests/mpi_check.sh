#!/usr/bin/env bash
# mpi_check.sh TWINPIPE SRC
# The multi-process path without GPUs: `mpirun -np D twinpipe execute` (one
# rank per device, MPI transport) must train exactly like one process with
# D worker threads: the same losses and parameter norm, digit for digit. With
# data-parallel replicas (D = K x R ranks) too: the all-reduce over MPI sums
# in the same order as in one process; and tied embeddings, whose first and
# last stages sum their gradients over MPI as two threads do.
set -euo pipefail
tp=$1; src=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0  # MPI_Init's own allocations are not ours
status=0
for case in "examples/quickstart.json gpipe" "examples/quickstart.json zb-h1" "examples/transformer_cpu.json interleaved" \
            "examples/cnn_cpu.json zb-v" "tests/inputs/replicas_cpu.json 1f1b" "tests/inputs/replicas_cpu.json interleaved" \
            "examples/llama_cpu.json 1f1b" "tests/inputs/llama_tied_cpu.json 1f1b"; do
  set -- $case
  config=$src/$1; schedule=$2
  devices=$(grep -o '"devices": *[0-9]*' "$config" | grep -o '[0-9]*$')
  one=$("$tp" execute "$config" -s "$schedule" --steps 2 --json | grep -E '"(final_loss|param_norm)"|^    [0-9.e+-]+,?$')
  many=$(timeout 120 mpirun -np "$devices" "$tp" execute "$config" -s "$schedule" --steps 2 --json \
           | grep -E '"(final_loss|param_norm)"|^    [0-9.e+-]+,?$')
  if ! grep -q final_loss <<< "$one"; then
    echo "$1 $schedule: no result from one process"; status=1
  elif [ "$one" = "$many" ]; then
    echo "$1 $schedule: mpirun -np $devices trains as one process does"
  else
    echo "$1 $schedule: DIFFERENT"; echo "one process:"; echo "$one"; echo "mpirun:"; echo "$many"; status=1
  fi
done
# One rank per device, or a clear message.
if out=$(timeout 60 mpirun -np 3 "$tp" execute "$src/examples/quickstart.json" --steps 1 2>&1); then
  echo "3 ranks for 2 devices should fail"; status=1
elif ! grep -q "3 ranks, but the schedule runs on 2 devices" <<< "$out"; then
  echo "unexpected message: $out"; status=1
fi
if out=$(timeout 60 mpirun -np 2 "$tp" execute "$src/tests/inputs/replicas_cpu.json" --steps 1 2>&1); then
  echo "2 ranks for 2 devices x 2 replicas should fail"; status=1
elif ! grep -q "2 ranks, but the schedule runs on 4 devices (2 x 2 replicas): start one rank per device (mpirun -np 4)" <<< "$out"; then
  echo "unexpected message: $out"; status=1
fi
exit $status
