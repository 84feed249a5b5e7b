#!/usr/bin/env bash
# On a GPU machine lent by the device tool (no Debian packages, no network):
# unpacks gpu-bundle/twinpipe.tar.xz (scripts/gpu_bundle.sh), points the
# loader at the CUDA libraries of the machine's Python environment, and runs
# the CUDA backend's tests, its benchmarks, the comparison with PyTorch and
# the measured half of the closed loop (execute --backend cuda with traces
# for examples/mlp_h100.json and examples/transformer_h100.json at K in
# {1, 2, 4} under GPipe and 1F1B, and the Llama-class example's), the
# kernel table of the GPU (bench/gpu_kernel_table.py) and the abort path
# under compute-sanitizer, and torch.distributed.pipelining steps on the GPU
# under torch.profiler (scripts/torch_pipelining_profile.py --device cuda,
# one rank: NCCL takes one rank a GPU). Each stage runs under a time limit, so
# one failure does not hide the rest. Everything lands in $OUT/gpu.tgz; the
# summary is printed. Calibrating, predicting and comparing need no GPU:
# scripts/gpu_loop.sh does them afterwards on the traces.
#   bash scripts/gpu_session.sh [stages...]   (default: all; stages: tests
#   sanitize bench torch kernels pipelining loop cross; LOOP_MODELS="a b" limits the
#   loop and cross runs to those examples)
set -u
OUT=${OUT:-/tmp/gpu-out}
work=/tmp/twinpipe-gpu
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf gpu-bundle/twinpipe.tar.xz
cd "$work/twinpipe"
sp=$(python3 -c 'import site; print(site.getsitepackages()[0])')
nv=$(find "$sp/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$PWD/lib:$nv:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
log=$work/log && mkdir -p "$log"
summary=$log/summary.txt
budget=${GPU_SESSION_BUDGET:-570}  # seconds for the whole session: later stages are skipped
run() {  # run NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  if [ $((SECONDS + 10)) -ge "$budget" ]; then echo "$name: skipped, out of time" | tee -a "$summary"; return; fi
  [ $((SECONDS + limit)) -le "$budget" ] || limit=$((budget - SECONDS))
  timeout "$limit" "$@" >"$log/$name.log" 2>&1
  local rc=$?
  printf '%-34s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "$(tail -1 "$log/$name.log" | cut -c1-120)" | tee -a "$summary"
  tar -C "$log" -czf "$OUT/gpu.tgz" .  # after every stage: a later one killed at the limit loses nothing
}
want() { [ -z "$stages" ] || [[ " $stages " == *" $1 "* ]]; }
stages="$*"

{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "commit $(cat COMMIT 2>/dev/null)"
  for b in twinpipe execute_cuda_test cuda_gemm_benchmark; do ldd $b | grep 'not found'; done; } >"$log/env.log" 2>&1
cat "$log/env.log" | tee -a "$summary"

want tests && run cuda_test 200 ./execute_cuda_test --gtest_output=json:"$log/cuda_test.json"
want tests && run cli_check 60 bash cuda_cli_check.sh ./twinpipe examples/quickstart.json
# One device's op fails: the others stop (no hang) and no kernel touches
# memory it should not, on the way there or in the tests' plain runs.
if want sanitize; then
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  for f in CudaExecute.AFailingOpIsNamed CudaLayers.TransformerBlockMatchesCpu; do
    run "sanitize_$f" 120 "$cs" --tool memcheck --error-exitcode 3 --leak-check full ./execute_cuda_test --gtest_filter="$f"
  done
  run sanitize_race 120 "$cs" --tool racecheck --error-exitcode 3 ./execute_cuda_test --gtest_filter=CudaLayers.AttentionMatchesCpu
fi
want kernels && run kernel_table 200 env PYTHONUNBUFFERED=1 python3 gpu_kernel_table.py --out "$log/kernels"
if want bench; then
  run gemm_bench 100 ./cuda_gemm_benchmark --benchmark_out="$log/gemm.json" --benchmark_out_format=json
  grep -q '^gemm_bench .*rc=0 ' "$summary" ||
    run gemm_backtrace 60 cuda-gdb -q -batch -ex run -ex bt --args ./cuda_gemm_benchmark
fi
if want torch; then
  for p in ${TORCH_PRECISIONS:-fp32 tf32 bf16}; do
    run "torch_compare_$p" 60 env PYTHONUNBUFFERED=1 python3 torch_compare.py ./twinpipe examples/mlp_h100.json \
      --steps 20 --precision "$p" --out "$log/torch_compare_$p.json"
  done
fi
# torch.distributed.pipelining on the GPU, each schedule's step under
# torch.profiler with its kernels, for `twinpipe import-trace` here.
want pipelining && run torch_pipelining 120 env PYTHONUNBUFFERED=1 python3 torch_pipelining_profile.py \
  --out "$log/torch_profile" --device cuda --world "${PIPELINING_WORLD:-1}" --width 2048 --rows 1024 --microbatches 4
# config MODEL K [key=value...]: examples/MODEL.json with K stages on K
# devices, on the GPUs there are (cluster.gpus: devices beyond them share
# one, as the executor places them) of the catalogue's kind of this GPU, and
# training.microbatches / pipeline.recompute overridden.
gpus=$(nvidia-smi -L | grep -c '^GPU')
kind=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo H200 || echo H100-SXM)
config() {
  GPUS=$gpus KIND=$kind python3 - "examples/$1.json" "${@:2}" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1])); k = int(sys.argv[2])
c["pipeline"]["stages"] = k; c["cluster"]["devices"] = k
c["cluster"]["gpus"] = min(k, int(os.environ["GPUS"])); c["cluster"]["device"] = os.environ["KIND"]
for kv in sys.argv[3:]:
    key, value = kv.split("=")
    section = "training" if key == "microbatches" else "pipeline"
    c[section][key] = int(value) if value.isdigit() else value
print(json.dumps(c, indent=1))
PY
}
execute() {  # execute NAME MODEL CONFIG SCHEDULE
  local precision=fp32 steps=10
  [ "$2" != mlp_h100 ] && precision=bf16 && steps=6
  run "loop_$1_$4" ${LOOP_LIMIT:-90} ./twinpipe execute "$3" -s "$4" --backend cuda --precision $precision \
    --steps $steps --force --json --trace "$log/loop/$1.$4.measured.json"
}
mkdir -p "$log/loop"
if want loop; then
  for model in ${LOOP_MODELS:-mlp_h100 transformer_h100 llama_h100}; do
    for K in 1 2 4; do
      config $model $K >"$log/loop/$model.k$K.json"
      for s in gpipe 1f1b; do execute "$model.k$K" $model "$log/loop/$model.k$K.json" $s; done
    done
  done
fi
# One GPU, one device: other micro-batch counts and recompute modes, which
# a calibration fitted to K=1 M=default GPipe must predict.
if want cross; then
  for v in "mlp_h100 microbatches=4" "mlp_h100 microbatches=16" "mlp_h100 recompute=none" \
           "transformer_h100 microbatches=8" "transformer_h100 microbatches=32" \
           "llama_h100 microbatches=8" "llama_h100 microbatches=32"; do
    set -- $v
    [[ " ${LOOP_MODELS:-$1} " == *" $1 "* ]] || continue
    name="$1.k1.$(echo "$2" | tr = -)"
    config $1 1 "$2" >"$log/loop/$name.json"
    execute "$name" $1 "$log/loop/$name.json" gpipe
  done
fi
tar -C "$log" -czf "$OUT/gpu.tgz" .
cp "$summary" "$OUT/summary.txt"
