#!/usr/bin/env bash
# Installs the Debian packages twinpipe needs (DESIGN.md section 9) when any is
# missing, then says what it found. CUDA, cuBLAS and NCCL come with the machine.
set -euo pipefail
packages=(cmake g++ ninja-build make libboost-graph-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          libopenblas-dev libopenmpi-dev openmpi-bin libgtest-dev libgmock-dev libbenchmark-dev
          libexpected-dev clang libclang-rt-14-dev pybind11-dev python3-dev python3-pytest zlib1g-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "twinpipe deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "twinpipe deps: all ${#packages[@]} Debian packages present"
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "twinpipe deps: CUDA toolkit found ($(ls -d /usr/local/cuda 2>/dev/null || command -v nvcc))"
else
  echo "twinpipe deps: no CUDA toolkit (GPU parts are not built)"
fi
