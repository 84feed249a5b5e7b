#!/usr/bin/env python3
"""The closed loop's tables from runs measured on a GPU (scripts/gpu_session.sh).

A calibration is fitted to one run per model (K=1 under GPipe with the
example's micro-batches) and predicts every other run; the catalogue's profile
(uncalibrated) predicts them too. Each prediction is compared with the
measured trace: step time, bubble fraction and peak memory (the executor's
account: the allocator's pool plus the parameters, gradients and Adam moments
outside it; the pool's own peak is listed beside it). Rows:
  - K in {1, 2, 4} under GPipe and 1F1B (on one GPU, K > 1 devices share it);
  - K=1 with other micro-batch counts and recompute modes (cross).
Writes OUT/tables.json and OUT/tables.md, and prints the latter.

  python3 scripts/gpu_tables.py build/twinpipe DIR OUT
    DIR: loop/ (configs NAME.json and traces NAME.SCHEDULE.measured.json)
         and logs/ (loop_NAME_SCHEDULE.log: execute --json)
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

MODELS = ("mlp_h100", "transformer_h100", "llama_h100")
# The two runs of other micro-batch counts each model's second calibration
# is fitted to (they tell a fixed cost per op from a cost per sample).
PAIRS = {"mlp_h100": ("microbatches-4", "microbatches-16"), "transformer_h100": ("microbatches-8", "microbatches-32"),
         "llama_h100": ("microbatches-8", "microbatches-32")}


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def Plain(path, tmp):
    """The trace at path, or its gzipped copy (path.gz) unpacked into tmp."""
    if os.path.exists(path):
        return path
    plain = os.path.join(tmp, os.path.basename(path))
    with gzip.open(path + ".gz", "rb") as src, open(plain, "wb") as dst:
        dst.write(src.read())
    return plain


def runs(loop):
    """(model, name, schedule) of every measured trace, K rows first."""
    found = []
    for f in sorted(os.listdir(loop)):
        if f.endswith((".measured.json", ".measured.json.gz")):
            name, sched = f[:f.index(".measured.json")].rsplit(".", 1)
            found.append((name.split(".")[0], name, sched))
    return sorted(found, key=lambda r: (r[0], "." in r[1][len(r[0]) + 4:], r[1], r[2] != "gpipe"))


def main():
    tp, top, out = sys.argv[1:4]
    loop, logs = os.path.join(top, "loop"), os.path.join(top, "logs")
    os.makedirs(out, exist_ok=True)
    cal, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        models = [m for m in MODELS if any(os.path.exists(os.path.join(loop, f"{m}.k1.gpipe.measured.json{z}"))
                                           for z in ("", ".gz"))]
        for model in models:
            cal[model] = os.path.join(out, f"{model}.k1.gpipe.calibration.json")
            run(tp, "calibrate", Plain(os.path.join(loop, f"{model}.k1.gpipe.measured.json"), tmp), "--config",
                os.path.join(loop, f"{model}.k1.json"), "-s", "gpipe", "-o", cal[model])
            two = []
            for variant in PAIRS[model]:
                two += [Plain(os.path.join(loop, f"{model}.k1.{variant}.gpipe.measured.json"), tmp),
                        "--config", os.path.join(loop, f"{model}.k1.{variant}.json")]
            cal[model, 2] = os.path.join(out, f"{model}.k1.two-sizes.calibration.json")
            run(tp, "calibrate", *two, "-s", "gpipe", "-o", cal[model, 2])
        for model, name, sched in runs(loop):
            config, trace = os.path.join(loop, f"{name}.json"), os.path.join(loop, f"{name}.{sched}.measured.json")
            trace = Plain(trace, tmp)
            log = open(os.path.join(logs, f"loop_{name}_{sched}.log")).read()
            executed = json.loads(log[log.index("{"):])
            c = json.load(open(config))
            row = {"run": name, "model": model, "stages": c["pipeline"]["stages"], "schedule": sched,
                   "microbatches": c["training"]["microbatches"], "recompute": c["pipeline"].get("recompute", "full"),
                   "fitted_to": name == f"{model}.k1" and sched == "gpipe",
                   "fitted_to_two": sched == "gpipe" and any(name.endswith(v) for v in PAIRS[model]),
                   "allocator_peak_bytes": max(d.get("allocator_peak_bytes", 0) for d in executed["devices"])}
            for kind, extra in (("uncalibrated", []), ("calibrated", ["--calibration", cal[model]]),
                                ("calibrated_two_sizes", ["--calibration", cal[model, 2]])):
                pred = os.path.join(tmp, "predicted.json")
                run(tp, "simulate", config, "-s", sched, *extra, "--trace", pred)
                cmp = json.loads(run(tp, "compare", pred, trace, "--json"))
                peak_p = max(d["peak_memory_predicted_bytes"] for d in cmp["devices"])
                peak_m = max(d["peak_memory_measured_bytes"] for d in cmp["devices"])
                row[kind] = {"step_predicted_s": cmp["step_time_predicted_s"],
                             "step_measured_s": cmp["step_time_measured_s"], "step_error": cmp["step_time_error"],
                             "bubble_predicted": cmp["bubble_fraction_predicted"],
                             "bubble_measured": cmp["bubble_fraction_measured"],
                             "peak_predicted_bytes": peak_p, "peak_measured_bytes": peak_m,
                             "peak_error": peak_p / peak_m - 1}
            rows.append(row)
    json.dump(rows, open(os.path.join(out, "tables.json"), "w"), indent=1)
    with open(os.path.join(out, "tables.md"), "w") as f:
        for kind, what in (("calibrated", "fitted to the row marked *, predicting every row"),
                           ("calibrated_two_sizes", "fitted to the two rows marked *, of other micro-batch counts"),
                           ("uncalibrated", "the catalogue's profile of the config's device")):
            f.write(f"\n{kind} ({what}):\n\n| model | K | M | recompute | schedule | predicted ms | measured ms | "
                    "error | bubble pred | bubble meas | peak pred GiB | peak meas GiB | error | pool peak GiB |\n"
                    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
            for r in rows:
                p = r[kind]
                mark = r["fitted_to_two" if kind == "calibrated_two_sizes" else "fitted_to"]
                f.write(f"| {r['model']}{' *' if mark else ''} | {r['stages']} | {r['microbatches']} | "
                        f"{r['recompute']} | {r['schedule']} | {p['step_predicted_s'] * 1e3:.2f} | "
                        f"{p['step_measured_s'] * 1e3:.2f} | {p['step_error'] * 100:+.1f}% | "
                        f"{p['bubble_predicted']:.3f} | {p['bubble_measured']:.3f} | "
                        f"{p['peak_predicted_bytes'] / 2**30:.2f} | {p['peak_measured_bytes'] / 2**30:.2f} | "
                        f"{p['peak_error'] * 100:+.1f}% | {r['allocator_peak_bytes'] / 2**30:.2f} |\n")
    print(open(os.path.join(out, "tables.md")).read())


if __name__ == "__main__":
    main()
