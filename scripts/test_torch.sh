#!/usr/bin/env bash
# test_torch.sh BUILD [VERSION...]: twinpipe's schedules through real PyTorch
# and back (issue 38, point 3; `make test-torch`). For each torch release
# (default: 2.15.0, the current one, and 2.5.1, the oldest --torch-version
# names) a virtual environment BUILD/torch-VERSION gets that release from PyPI
# (pip's cache keeps the wheels between runs; several GB with its CUDA
# libraries, which the CPU runs here do not use) and
# scripts/torch_roundtrip.py runs with it: results in
# BUILD/torch-roundtrip-VERSION/results.json. Where PyPI cannot be reached the
# release is skipped with a message (exit 0 if every release was skipped);
# exit 1 if a case failed.
set -uo pipefail
build=${1:?usage: test_torch.sh BUILD [VERSION...]}; shift
versions=("$@"); [ ${#versions[@]} -gt 0 ] || versions=(2.15.0 2.5.1)
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3; command -v "$python" > /dev/null || python=python3
status=0; ran=0
for v in "${versions[@]}"; do
  env="$build/torch-$v"
  if ! "$env/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$v')" 2> /dev/null; then
    echo "torch $v: installing into $env from PyPI (cached by pip)"
    if ! { "$python" -m venv "$env" && "$env/bin/pip" install -q "torch==$v" numpy; }; then
      echo "skipped: torch $v could not be installed from PyPI (registry unreachable?); nothing was tested with it"
      continue
    fi
  fi
  ran=$((ran + 1))
  "$env/bin/python" "$here/scripts/torch_roundtrip.py" "$build/twinpipe" --out "$build/torch-roundtrip-$v" \
    2> >(grep -v -i "warning" >&2) || status=1
done
[ $ran -gt 0 ] || echo "skipped: no torch release could be installed"
exit $status
