#!/usr/bin/env python3
"""Issue 6's fidelity target, measured: for K in {1, 2}, M in {4, 8, 16},
GPipe and 1F1B on examples/quickstart.json, calibrate from a separate
profiling run (another seed) of the same configuration, predict, measure the
median of --steps steps, and compare. Prints one row per case and how many
meet the targets (step time within 5%, bubble within 0.03, peak memory
within 5%); --json writes the rows.

  python3 bench/fidelity_sweep.py build/twinpipe --steps 10 --json out/fidelity.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("twinpipe")
    ap.add_argument("--config", default="examples/quickstart.json")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    base = json.load(open(a.config))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for k in (1, 2):
            for m in (4, 8, 16):
                cfg = json.loads(json.dumps(base))
                cfg["pipeline"]["stages"] = k
                cfg["cluster"]["devices"] = k
                cfg["training"]["microbatches"] = m
                path = os.path.join(work, f"k{k}m{m}.json")
                json.dump(cfg, open(path, "w"))
                for schedule in ("gpipe", "1f1b"):
                    f = lambda name: os.path.join(work, name)
                    run(a.twinpipe, "execute", path, "-s", schedule, "--steps", str(a.steps), "--seed", "7",
                        "--trace", f("profile.json"))
                    run(a.twinpipe, "calibrate", f("profile.json"), "--config", path, "-s", schedule,
                        "-o", f("cal.json"))
                    run(a.twinpipe, "simulate", path, "-s", schedule, "--calibration", f("cal.json"),
                        "--trace", f("pred.json"))
                    run(a.twinpipe, "execute", path, "-s", schedule, "--steps", str(a.steps), "--seed", "1",
                        "--trace", f("meas.json"))
                    c = json.loads(run(a.twinpipe, "compare", f("pred.json"), f("meas.json"), "--json"))
                    mem = max(abs(d["peak_memory_error"]) for d in c["devices"])
                    row = {"K": k, "M": m, "schedule": schedule,
                           "step_predicted_ms": c["step_time_predicted_s"] * 1e3,
                           "step_measured_ms": c["step_time_measured_s"] * 1e3,
                           "step_time_error": c["step_time_error"],
                           "bubble_predicted": c["bubble_fraction_predicted"],
                           "bubble_measured": c["bubble_fraction_measured"],
                           "peak_memory_error": mem}
                    row["ok"] = (abs(row["step_time_error"]) <= 0.05 and
                                 abs(row["bubble_predicted"] - row["bubble_measured"]) <= 0.03 and mem <= 0.05)
                    rows.append(row)
                    print(f"K={k} M={m:2d} {schedule:5s}  step {row['step_predicted_ms']:7.2f} / "
                          f"{row['step_measured_ms']:7.2f} ms ({row['step_time_error'] * 100:+5.1f}%)  bubble "
                          f"{row['bubble_predicted']:.3f} / {row['bubble_measured']:.3f}  memory "
                          f"{mem * 100:4.1f}%  {'ok' if row['ok'] else 'MISS'}", flush=True)
    print(f"{sum(r['ok'] for r in rows)} of {len(rows)} cases meet all three targets")
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        json.dump(rows, open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
