#!/usr/bin/env python3
"""FP8 / BF16 step-time ratios of a table of runs (issue 36's target: each
configuration's predicted ratio within 5 points of the measured one).

Pairs every fp8 run with the bf16 run whose config is the same but for the
precision (model.dtype, training.fp8_params) and whose table line precedes
it most closely (the shared table lists each recipe's BF16 rows, then its
FP8 rows), simulates both with `twinpipe simulate --json` (and
--calibration), and prints measured and predicted ratios and their
difference in points, then the mean and largest absolute difference.

  scripts/fp8_ratio.py build/twinpipe traces/published/h100-dgx-cloud/runs.jsonl [--calibration C]
"""
import argparse
import json
import subprocess
import sys
import tempfile


def key_of(config):
    c = json.loads(json.dumps(config))
    c["model"].pop("dtype", None)
    c["training"].pop("fp8_params", None)
    return json.dumps(c, sort_keys=True)


def predict(twinpipe, config, calibration):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(config, f)
        f.flush()
        cmd = [twinpipe, "simulate", f.name, "--json"] + (["--calibration", calibration] if calibration else [])
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            sys.exit(f"fp8_ratio: {' '.join(cmd)}: {out.stderr.strip()}")
        return json.loads(out.stdout)["step_time_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("twinpipe")
    ap.add_argument("runs")
    ap.add_argument("--calibration")
    a = ap.parse_args()
    runs = [json.loads(line) for line in open(a.runs) if line.strip()]
    last_bf16 = {}
    diffs = []
    print(f"{'line':>5} {'gpus':>5} {'measured':>9} {'predicted':>9} {'points':>7}")
    for r in runs:
        k = key_of(r["config"])
        dtype = r["config"]["model"].get("dtype")
        if dtype == "bf16":
            last_bf16[k] = r
            continue
        if dtype != "fp8" or k not in last_bf16:
            continue
        b = last_bf16[k]
        measured = r["step_time_s"] / b["step_time_s"]
        predicted = predict(a.twinpipe, r["config"], a.calibration) / predict(a.twinpipe, b["config"], a.calibration)
        diffs.append(100 * (predicted - measured))
        print(f"{r.get('row', '?'):>5} {r['config']['cluster']['devices']:>5} {measured:9.3f} {predicted:9.3f} "
              f"{diffs[-1]:+7.2f}")
    if not diffs:
        sys.exit("fp8_ratio: no fp8 run has a bf16 twin")
    print(f"{len(diffs)} pairs   mean |difference| {sum(map(abs, diffs)) / len(diffs):.2f} points   "
          f"largest {max(map(abs, diffs)):.2f} points")


if __name__ == "__main__":
    main()
