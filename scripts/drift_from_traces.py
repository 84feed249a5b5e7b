#!/usr/bin/env python3
"""A GPU's drift: how far apart repeats of the same work come out, from
measured one-device traces (`execute --backend cuda`, K = 1).

Every op of one kind on one stage repeats the same work (the micro-batches
are the same size), so the spread of their durations is the machine's own:
clocks, power, the host's issue, the framework. The first op of each kind
is left out: its warm-up (allocations, first launches) comes at the same
point of a step on every GPU of a run, so it is no drift between them.
Taken as a random walk (the variance of a stretch of work grows with its
length), a stretch of W seconds has a standard deviation of k sqrt(W); each
(trace, op kind) with at least 4 repeats after the first gives
k = stdev / sqrt(mean). The figure is the median over them (the catalogue's
Device::drift: cost_models/catalogue.cc). Traces of several devices on one
GPU (K > 1) are skipped: their ops contend for it.

  scripts/drift_from_traces.py traces/recorded/h100/loop [--json]
"""
import argparse
import glob
import gzip
import json
import math
import os
import statistics
import sys


def op_spreads(path):
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        trace = json.load(f)
    if trace.get("devices") != 1 or trace.get("replicas", 1) != 1:
        return []
    durations = {}
    for e in trace["events"]:
        if e["stream"] == "compute":
            durations.setdefault((e["kind"], e["stage"]), []).append(e["end_s"] - e["start_s"])
    rows = []
    for (kind, stage), d in sorted(durations.items()):
        d = d[1:]  # the warm-up
        if len(d) < 4:
            continue
        mean = statistics.fmean(d)
        sd = statistics.pstdev(d)
        rows.append({"trace": os.path.basename(path), "op": f"{kind}{stage}", "n": len(d), "mean_s": mean,
                     "stdev_s": sd, "k": sd / math.sqrt(mean)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="a folder of *.measured.json(.gz) traces")
    ap.add_argument("--json", action="store_true", help="print the median and the rows as JSON")
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(a.folder, "*.measured.json*")))
    rows = [r for p in paths for r in op_spreads(p)]
    if not rows:
        sys.exit(f"drift_from_traces: {a.folder}: no one-device measured trace with repeated ops")
    median = statistics.median(r["k"] for r in rows)
    if a.json:
        print(json.dumps({"median_k": median, "rows": rows}, indent=1))
        return
    print(f"{'trace':<48} {'op':>4} {'n':>3} {'mean ms':>9} {'cv':>7} {'k ms/sqrt(s)':>13}")
    for r in rows:
        print(f"{r['trace']:<48} {r['op']:>4} {r['n']:>3} {1e3 * r['mean_s']:9.2f} "
              f"{100 * r['stdev_s'] / r['mean_s']:6.2f}% {1e3 * r['k']:13.3f}")
    print(f"{len(rows)} op kinds   median k {1e3 * median:.3f} ms over a second of work "
          f"(stdev of a stretch of W seconds: k sqrt(W))")


if __name__ == "__main__":
    main()
