#!/usr/bin/env python3
"""partition_peak_check.py TWINPIPE CONFIG

`twinpipe partition` and `twinpipe simulate` plan the same schedule: each
device's peak memory in partition's cells (the largest of its cells) is
within 1% of the peak simulate walks op by op (the auto schedule's too,
whose peaks are those of the order its builder chose, not of its shape).
"""
import json
import subprocess
import sys


def run(args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    tp, config = sys.argv[1], sys.argv[2]
    cells = run([tp, "partition", config, "--json"])["cells"]
    devices = run([tp, "simulate", config, "--json"])["devices"]
    planned = {}
    for cell in cells:
        planned[cell["device"]] = max(planned.get(cell["device"], 0.0), cell["peak_memory_bytes"])
    worst = 0.0
    for d in devices:
        p, s = planned[d["device"]], d["peak_memory_bytes"]
        worst = max(worst, abs(p / s - 1))
        print(f"device {d['device']}: partition {p / 2**30:.3f} GiB, simulate {s / 2**30:.3f} GiB")
    if worst > 0.01:
        sys.exit(f"partition's peaks differ from simulate's by up to {100 * worst:.2f}% (at most 1%)")
    print(f"peaks agree within {100 * worst:.3f}%")


if __name__ == "__main__":
    main()
