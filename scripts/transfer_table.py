#!/usr/bin/env python3
"""Does a calibration carry from the runs it was fitted on to others
(issue 37)? Fits `calibrate --runs` on one published table (or part of it)
and predicts others, uncalibrated and calibrated, and records each fit's
coefficients with their status (fitted, at a bound, held) and how many of
the predicted runs lie outside the fitted runs' coverage.

  scripts/transfer_table.py build/twinpipe traces/published -o traces/published/transfer [--check]

--check holds issue 37's targets and exits 1 where one is missed, or where
the table printed differs from OUT/table.md as recorded (--expected FILE): fitted on
the vTrain rows, Korthikanti et al.'s runs within 5%; fitted on the DGX Cloud
rows of at most 16 GPUs, its rows of 64 and more within 8%; no calibration
worse than no calibration by more than a point on any table; no fitted
coefficient at a bound.

Writes OUT/<fit>.json (each calibration), OUT/<fit>.jsonl (the fitted rows
where they are a part of a table) and prints the markdown table that
traces/published/README.md records.
"""
import argparse
import json
import os
import subprocess
import sys


def rows(path):
    with open(path) as f:
        return [line for line in f if line.strip()]


def config(line):
    return json.loads(line)["config"]


def write(path, lines):
    with open(path, "w") as f:
        f.writelines(lines)


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"transfer_table: {' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    return out


def validate(twinpipe, runs, calibration=None):
    cmd = [twinpipe, "validate", runs, "--json"] + (["--calibration", calibration] if calibration else [])
    v = json.loads(run(cmd).stdout)
    return v["mape"], v["bias"], v.get("extrapolated_runs", 0), v["runs"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("twinpipe")
    ap.add_argument("published", help="traces/published")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--check", action="store_true", help="hold issue 37's targets (exit 1 where one is missed)")
    ap.add_argument("--expected", help="with --check: the recorded table, which the printed one must equal")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    p = a.published
    vtrain, korth, h100 = f"{p}/vtrain-a100", f"{p}/korthikanti2022/runs.jsonl", f"{p}/h100-dgx-cloud/runs.jsonl"
    small = [l for l in rows(h100) if config(l)["cluster"]["devices"] <= 16]
    large = [l for l in rows(h100) if config(l)["cluster"]["devices"] >= 64]
    write(f"{a.out}/h100_small.jsonl", small)
    write(f"{a.out}/h100_large.jsonl", large)
    # (name, fitted on, [(what, runs)])
    studies = [
        ("vtrain_all", f"{vtrain}/runs_all.jsonl", "the 720 vTrain rows (one node, hidden 1024/2048)",
         [("Korthikanti et al., 8 runs (22B-1T, 8-512 GPUs)", korth),
          ("vTrain, the 720 rows it was fitted on", f"{vtrain}/runs_all.jsonl")]),
        ("vtrain_layers12", f"{vtrain}/runs_layers12.jsonl", "the 160 vTrain rows of 12 layers, t = 1",
         [("vTrain, the 160 rows of 20 layers", f"{vtrain}/runs_layers20.jsonl"),
          ("vTrain, the 400 tensor-parallel rows", f"{vtrain}/runs_tp.jsonl"),
          ("Korthikanti et al., 8 runs", korth)]),
        ("h100_small", f"{a.out}/h100_small.jsonl", "the 12 DGX Cloud rows of 8 and 16 H100s (Llama 3.1 8B)",
         [(f"DGX Cloud, its {len(large)} rows of 64 to 2,048 GPUs", f"{a.out}/h100_large.jsonl")]),
        ("h100_all", h100, "all 86 DGX Cloud rows",
         [("DGX Cloud, the 86 rows it was fitted on", h100)]),
    ]
    lines = []

    def emit(line=""):
        lines.append(line)
        print(line)

    emit("| fitted on | predicting | runs | uncalibrated | calibrated | bias | outside the fit's coverage |")
    emit("|---|---|---|---|---|---|---|")
    fits = []
    missed = []
    limits = {("vtrain_all", korth): 0.05, ("h100_small", f"{a.out}/h100_large.jsonl"): 0.08}
    for name, fitted, label, targets in studies:
        cal = f"{a.out}/{name}.json"
        if os.path.exists(cal):
            os.remove(cal)  # never read a calibration an earlier run left
        run([a.twinpipe, "calibrate", "--runs", fitted, "-o", cal])
        with open(cal) as f:
            fits.append((label, json.load(f)["profile"]))
        for what, runs in targets:
            before, _, _, n = validate(a.twinpipe, runs)
            after, bias, outside, _ = validate(a.twinpipe, runs, cal)
            emit(f"| {label} | {what} | {n} | {100 * before:.2f}% | **{100 * after:.2f}%** | {100 * bias:+.2f}% | {outside} |")
            if after > before + 0.01:
                missed.append(f"{name} -> {runs}: calibrated {100 * after:.2f}% is worse than uncalibrated {100 * before:.2f}% by more than a point")
            limit = limits.get((name, runs))
            if limit is not None and after > limit:
                missed.append(f"{name} -> {runs}: calibrated {100 * after:.2f}% outside {100 * limit:.0f}%")
    emit()
    keys = ("gemm_efficiency", "bandwidth_efficiency", "launch_overhead_s", "kernel_floor_s", "kernel_launch_s")
    emit("| fit | " + " | ".join(keys) + " |")
    emit("|---|" + "---|" * len(keys))
    for label, profile in fits:
        cells = []
        for key in keys:
            c = profile["coefficients"][key]
            value = f"{1e6 * c['value']:.2f} us" if key.endswith("_s") else f"{c['value']:.3f}"
            cells.append(f"{value} ({c['status']}, {100 * c['sensitivity']:.1f}%)")
        emit(f"| {label} | " + " | ".join(cells) + " |")
        # At a bound by its value, whatever its status says (a held value too).
        for key, c in profile["coefficients"].items():
            low, high = c["range"]
            share = (c["value"] - low) / (high - low)
            if share <= 0.005 or share >= 0.995:
                missed.append(f"{label}: {key} {c['value']:.4g} at an end of [{low:.4g}, {high:.4g}] ({c['status']})")
    if a.check and a.expected:
        with open(a.expected) as f:
            recorded = f.read().splitlines()
        if recorded != lines:
            missed.append(f"the table differs from {a.expected} (regenerate it with this script and record why)")
    if a.check:
        for m in missed:
            print(f"transfer_table: missed: {m}", file=sys.stderr)
        sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
