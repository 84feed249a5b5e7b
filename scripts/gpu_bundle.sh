#!/usr/bin/env bash
# Packs what a GPU machine without Debian packages needs to run the CUDA
# backend: the stripped twinpipe, the CUDA test and benchmark binaries, the
# examples, bench/torch_compare.py, bench/gpu_kernel_table.py,
# tests/cuda_cli_check.sh and scripts/torch_pipelining_profile.py, and the
# shared libraries ldd lists that are not CUDA's (OpenBLAS, fmt, Open MPI,
# ...), into gpu-bundle/twinpipe.tar.xz.
# There: tar xf twinpipe.tar.xz && cd twinpipe &&
#        LD_LIBRARY_PATH=$PWD/lib:$NVIDIA_LIBS ./execute_cuda_test
set -euo pipefail
build=${1:-build}
out=gpu-bundle/twinpipe
rm -rf gpu-bundle && mkdir -p "$out/lib"
bins=("$build/twinpipe" "$build/execute/cuda/execute_cuda_test" "$build/bench/cuda_gemm_benchmark")
for b in "${bins[@]}"; do
  cp "$b" "$out/"
  # The benchmark keeps its symbols, for a backtrace under cuda-gdb there.
  [ "$(basename "$b")" = cuda_gemm_benchmark ] || strip "$out/$(basename "$b")"
done
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux|libstdc\+\+|libgcc_s)[.-]|/cuda' \
    | while read -r lib; do cp -nL "$lib" "$out/lib/"; done
done
cp -r examples bench/torch_compare.py bench/gpu_kernel_table.py tests/cuda_cli_check.sh scripts/torch_pipelining_profile.py "$out/"
git describe --always --dirty > "$out/COMMIT" 2>/dev/null || true  # -dirty: built from uncommitted work
tar -C gpu-bundle -cJf gpu-bundle/twinpipe.tar.xz twinpipe
rm -rf "$out"  # only the archive travels
du -h gpu-bundle/twinpipe.tar.xz
