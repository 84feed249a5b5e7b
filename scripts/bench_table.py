#!/usr/bin/env python3
"""Runs every Google Benchmark of bench/ and prints one table: each figure
next to its target (issues 18 and 19), so that a regression shows on the next
run. Writes the figures with the commit to traces/recorded/<machine>/bench.json.

  python3 scripts/bench_table.py build [--machine cpu-2core] [--no-record]

Each benchmark runs pinned to core 0 (taskset) when it can be, as the targets
are stated for one core. The GPU benchmark is skipped without a GPU.

The development machine is shared: the same binary runs up to 40% slower
from one minute to the next. So each short benchmark runs --runs times (3),
each in a fresh process (the "fresh" simulation is a process's first call),
and the table gives the best run, with the spread of all runs beside it; the
long ones (the 405B searches, the executor step) run once.

The first two rows time fixed work that uses no twinpipe code
(bench/machine_benchmark.cc): a chain of multiply-adds (the core) and a
chain of loads over 64 MiB (the memory past the caches). The machine's own
speed has varied by up to 4 times from day to day on unchanged code, the core
and the memory apart. They are recorded as `reference_ms` beside the figures,
and the table says how this machine compares with the recording it would
replace, so that a slow machine is not read as slow code.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

# (binary, filter, benchmark name, figure, how to read it, target, comparison)
# figure readers: 'ms' real time in ms, 'counter:<name>', 'items' items/s.
ROWS = [
    ("machine_benchmark", "Reference", "BM_ReferenceLoop", "machine reference: 2^25 dependent multiply-adds", "ms", None, None),
    ("machine_benchmark", "Reference", "BM_ReferenceMemory", "machine reference: 2^21 dependent loads over 64 MiB", "ms", None, None),
    ("search_benchmark", "MaxLayers", "BM_MaxLayersGpipeTable1", "max-layers, GPipe Table 1 on 128 TPUv3", "ms", 1000, "<"),
    ("schedule_benchmark", "Build1F1B", "BM_Build1F1BInsertCommVerify/128/1024", "1F1B K=128 M=1024 build+comm+verify", "ms", 50, "<"),
    ("schedule_benchmark", "VerifyOnly", "BM_VerifyOnly", "verify only, K=128 M=1024", "ms", None, None),
    ("simulate_benchmark", "Simulate1F1B/", "BM_Simulate1F1B/8/32", "simulate 1F1B K=8 M=32, ops/s", "counter:ops_per_s", 10e6, ">="),
    ("simulate_benchmark", "Simulate1F1B/", "BM_Simulate1F1B/64/512", "simulate 1F1B K=64 M=512, ops/s", "counter:ops_per_s", 10e6, ">="),
    ("simulate_benchmark", "Simulate1F1B/", "BM_Simulate1F1B/512/4096", "simulate 1F1B K=512 M=4096 (fresh), ops/s", "counter:ops_per_s", 10e6, ">="),
    ("simulate_benchmark", "Simulate1F1B/", "BM_Simulate1F1B/512/4096", "simulate K=512 M=4096, bytes per op", "counter:peak_bytes_per_op", 128, "<="),
    ("search_benchmark", "BM_Search/", "BM_Search/8/64", "search 8 GPUs, configs/s", "items", None, None),
    ("search_benchmark", "BM_Search/", "BM_Search/16/128", "search 16 GPUs, configs/s", "items", None, None),
    ("search_benchmark", "175B", "BM_Search175BOn1024", "search 175B on 1024 A100s, configs/s", "items", 10000, ">="),
    ("search_benchmark", "Llama405B", "BM_SearchLlama405BOn16384/0", "search Llama 3.1 405B on 16,384 H100s, BF16, configs/s", "items", 10000, ">="),
    ("search_benchmark", "Llama405B", "BM_SearchLlama405BOn16384/1", "search Llama 3.1 405B on 16,384 H100s, FP8, configs/s", "items", 10000, ">="),
    ("simulate_benchmark", "MlperfGpt3", "BM_SimulateMlperfGpt3On11616", "simulate MLPerf GPT-3 175B on 11,616 H100s", "ms", 1000, "<"),
    ("partition_benchmark", "MinMax", "BM_MinMax/100000/1024/0", "minmax 100k layers into 1024", "ms", None, None),
    ("execute_benchmark", "TransformerStep", "BM_TransformerStep/1/1", "CPU executor, 4-block transformer, 1 mb (vs PyTorch: make bench-torch)", "ms", None, None),
    ("execute_benchmark", "TransformerStep", "BM_TransformerStep/1/4", "CPU executor, 4-block transformer, 4 mb", "ms", None, None),
]


def run(binary, flt):
    cmd = [binary, f"--benchmark_filter={flt}", "--benchmark_format=json"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_table: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)["benchmarks"]


def figure(bench, how):
    if how == "ms":
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bench.get("time_unit", "ns")]
        return bench["real_time"] * scale
    if how == "items":
        return bench.get("items_per_second", 0.0)
    return bench[how.split(":", 1)[1]]


# Benchmarks that take minutes: one run.
LONG = {"TransformerStep", "Llama405B"}


def best(values, how, cmp):
    """The best of several runs: the fastest time, the highest rate (bytes
    per op, a size, are alike from run to run: the lowest)."""
    higher_is_better = cmp == ">=" or how == "items" or (how.startswith("counter:") and how.endswith("_per_s"))
    return max(values) if higher_is_better else min(values)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--machine", default="cpu-2core")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--runs", type=int, default=3, help="processes per short benchmark (the best counts)")
    a = ap.parse_args()
    cache, table = {}, []
    for binary, flt, name, what, how, target, cmp in ROWS:
        path = os.path.join(a.build, "bench", binary)
        if not os.path.exists(path):
            sys.exit(f"bench_table: {path} is missing: run make build first")
        key = (binary, flt)
        if key not in cache:
            runs = 1 if flt in LONG else max(1, a.runs)
            print(f"running {binary} --benchmark_filter={flt} ({runs}x) ...", file=sys.stderr, flush=True)
            cache[key] = [run(path, flt) for _ in range(runs)]
        values = []
        for benchmarks in cache[key]:
            found = [b for b in benchmarks if b["name"].split("/iterations:")[0] == name]
            if not found:
                sys.exit(f"bench_table: {binary} has no benchmark {name}")
            values.append(figure(found[0], how))
        value = best(values, how, cmp)
        met = None
        if target is not None:
            met = {"<": value < target, "<=": value <= target, ">=": value >= target}[cmp]
        table.append({"benchmark": name, "what": what, "value": value, "unit": how,
                      "target": target, "comparison": cmp, "met": met, "runs": values})
    width = max(len(r["what"]) for r in table)
    print(f"{'what':<{width}}  {'best':>14}  {'target':>12}  met  {'runs: min - max':>20}")
    for r in table:
        unit = "ms" if r["unit"] == "ms" else ""
        value = f"{r['value']:.4g} {unit}".strip()
        target = f"{r['comparison']} {r['target']:.4g}" if r["target"] is not None else "-"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        spread = f"{len(r['runs'])}: {min(r['runs']):.4g} - {max(r['runs']):.4g}" if len(r["runs"]) > 1 else "1"
        print(f"{r['what']:<{width}}  {value:>14}  {target:>12}  {met:>3}  {spread:>20}")
    reference = {r["benchmark"]: r["value"] for r in table if r["benchmark"].startswith("BM_Reference")}
    # The kernels OpenBLAS chose at load (the CPU executor's GEMMs): on a
    # virtual CPU whose model it does not know, generic ones 2-3x slower.
    probe = subprocess.run([os.path.join(a.build, "bench", "execute_benchmark"), "--benchmark_filter=^$"],
                           capture_output=True, text=True, env={**os.environ, "OPENBLAS_VERBOSE": "2"})
    blas_core = next((line.split(":", 1)[1].strip() for line in (probe.stdout + probe.stderr).splitlines()
                      if line.startswith("Core:")), None)
    print(f"OpenBLAS kernels: {blas_core or 'unknown'}"
          f"{' (OPENBLAS_CORETYPE)' if os.environ.get('OPENBLAS_CORETYPE') else ''}", file=sys.stderr)
    recorded_path = os.path.join("traces", "recorded", a.machine, "bench.json")
    if os.path.exists(recorded_path):
        with open(recorded_path) as f:
            recorded = json.load(f)
        then = recorded.get("reference_ms") or {}
        for name, ms in reference.items():
            if name in then:
                print(f"{name}: {ms:.4g} ms against {then[name]:.4g} ms when {recorded_path} was recorded "
                      f"({recorded.get('date', '?')}, {recorded.get('commit', '?')}): this machine runs it at "
                      f"{then[name] / ms:.2f} x that speed", file=sys.stderr)
            else:
                print(f"{name}: {ms:.4g} ms; {recorded_path} has no such figure to compare with", file=sys.stderr)
    if not a.no_record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        out_dir = os.path.join("traces", "recorded", a.machine)
        os.makedirs(out_dir, exist_ok=True)
        record = {"commit": commit, "date": datetime.date.today().isoformat(),
                  "command": f"make bench (python3 scripts/bench_table.py build --runs {a.runs})",
                  "reference_ms": reference, "blas_core": blas_core, "rows": table}
        with open(os.path.join(out_dir, "bench.json"), "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        print(f"recorded in {out_dir}/bench.json (commit {commit})", file=sys.stderr)


if __name__ == "__main__":
    main()
