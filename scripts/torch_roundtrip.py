#!/usr/bin/env python3
"""twinpipe's schedules in torch.distributed.pipelining and back (issue 38, point 3).

Forward: for every twinpipe schedule kind and several (K, M, chunks), twinpipe
writes the schedule CSV of the installed torch release (`twinpipe schedule
--format torch-csv --torch-version X.Y`, compute-only and compute + comms);
K processes joined by gloo on the CPU load it into torch's own runtime
(`_PipelineScheduleRuntime._load_csv`, which runs torch's validation:
`_validate_schedule`, the REDUCE_GRAD pairing, `_validate_send_waits`), torch
simulates it for deadlock (`_simulate_comms_compute`), runs one step of a small
float64 model (one Linear + tanh per stage, MSE loss per micro-batch, torch's
default scale_grads=True), and each stage's parameter gradients are held
against the unpipelined model's on the whole batch (relative 1e-5 of the
largest gradient).

Reverse: every schedule class torch has (single-stage ScheduleGPipe and
Schedule1F1B through `_get_pipeline_order`, the multi-stage ones with mock
stages, no processes) is written as torch's `_dump_csv` writes it (compute
only and compute + comms) and read by twinpipe: `verify`, `simulate` and
`execute` (a small MLP config of as many layers as stages).

  python3 scripts/torch_roundtrip.py build/twinpipe --out build/torch-roundtrip [--quick]

Prints one line per case; writes OUT/results.json; exit 1 if a case failed.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import schedules as S
from torch.distributed.pipelining import PipelineStage

WIDTH = 8
ROWS = 3          # rows per micro-batch
REL_TOL = 1e-5

# twinpipe schedule kind: (K, M, chunks) cases; chunks 0 = twinpipe's default
FORWARD_CASES = {
    "naive":       [(2, 2, 0), (3, 3, 0)],
    "gpipe":       [(2, 2, 0), (2, 4, 0), (3, 5, 0), (4, 8, 0)],
    "1f1b":        [(2, 4, 0), (3, 3, 0), (3, 7, 0), (4, 8, 0), (4, 9, 0)],
    "interleaved": [(2, 4, 2), (2, 4, 3), (3, 6, 2), (4, 8, 2)],
    "zb-h1":       [(2, 4, 0), (3, 6, 0), (4, 8, 0)],
    "zb-h2":       [(2, 4, 0), (4, 8, 0)],
    "zb-v":        [(2, 4, 0), (3, 6, 0), (4, 8, 0)],
    "dualpipev":   [(2, 4, 0), (4, 10, 0)],
}
QUICK = {"gpipe": [(2, 4, 0)], "1f1b": [(3, 7, 0)], "interleaved": [(2, 4, 2)],
         "zb-h1": [(2, 4, 0)], "zb-v": [(2, 4, 0)], "dualpipev": [(2, 4, 0)]}

REVERSE_CLASSES = ["ScheduleGPipe", "Schedule1F1B", "ScheduleInterleaved1F1B",
                   "ScheduleLoopedBFS", "ScheduleInterleavedZeroBubble",
                   "ScheduleZBVZeroBubble", "ScheduleDualPipeV"]
# issue 38's grid: K in {2, 3, 4, 8}, M in {K, 2K, 2K + 1, 4K}
REVERSE_CASES = [(k, m) for k in (2, 3, 4, 8) for m in (k, 2 * k, 2 * k + 1, 4 * k)]


def torch_release():
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def release_tuple():
    return tuple(int(x) for x in torch_release().split("."))


def kind(computation_type):
    """An action's name in the CSV ("F", "B", "SEND_F"): 2.6 on, the enum's
    value; 2.5, its str()."""
    v = computation_type.value
    return v if isinstance(v, str) else str(computation_type)


def subs(action):
    """The action, or the actions an OVERLAP_F_B (2.9 on) stands for."""
    return getattr(action, "sub_actions", None) or (action,)


# ---------------------------------------------------------------- forward ---
def stage_module(index):
    gen = torch.Generator().manual_seed(1000 + index)
    layer = torch.nn.Linear(WIDTH, WIDTH, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(WIDTH, WIDTH, generator=gen, dtype=torch.float64) / WIDTH ** 0.5)
        layer.bias.copy_(torch.randn(WIDTH, generator=gen, dtype=torch.float64) * 0.1)
    return torch.nn.Sequential(layer, torch.nn.Tanh())


def batch(microbatches):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(microbatches * ROWS, WIDTH, generator=gen, dtype=torch.float64)
    y = torch.randn(microbatches * ROWS, WIDTH, generator=gen, dtype=torch.float64)
    return x, y


def reference_gradients(stages, microbatches, scaled):
    """Each stage's gradients of the unpipelined model: the MSE over the whole
    batch where torch divides the accumulated gradients by M (scale_grads, 2.6
    on, default True), else the sum of the micro-batches' MSEs (2.5 scales
    nothing)."""
    mods = [stage_module(i) for i in range(stages)]
    x, y = batch(microbatches)
    out = x
    for m in mods:
        out = m(out)
    loss = torch.nn.functional.mse_loss(out, y)
    (loss if scaled else loss * microbatches).backward()
    return {i: [p.grad.clone() for p in m.parameters()] for i, m in enumerate(mods)}


def csv_stage_ranks(path):
    """stage -> rank, as the CSV's rows place them (row r is rank r)."""
    placement = {}
    with open(path, newline="") as f:
        for rank, row in enumerate(csv.reader(f)):
            for cell in row:
                a = S._Action.from_str(cell) if cell.strip() else None
                if a is not None:
                    for sub in subs(a):
                        placement.setdefault(sub.stage_index, rank)
    return placement


SIMULATED = {getattr(S, n) for n in ("F", "I", "W", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B",
                                      "WAIT_SEND_F", "WAIT_SEND_B") if hasattr(S, n)}


def torch_simulate(sched):
    """torch's own dry run of the lowered program (_simulate_comms_compute), which
    flags a deadlock or a missing transfer. It knows compute and transfers only,
    and raises on UNSHARD / RESHARD / REDUCE_GRAD, which torch's own lowering
    adds; those are local to a rank and order nothing across ranks, so they are
    left out (and the sub-actions of an OVERLAP_F_B taken one by one)."""
    if not hasattr(S, "_simulate_comms_compute"):  # 2.5 has none
        return
    order = {}
    for rank, actions in sched.pipeline_order_with_comms.items():
        order[rank] = [sub for a in actions if a is not None for sub in subs(a)
                       if sub.computation_type in SIMULATED]
    S._simulate_comms_compute(order, lambda s: sched.stage_index_to_group_rank[s], sched._num_stages)


class Refused(Exception):
    """torch refuses the case before any process talks to another (the same on
    every rank): the group stays usable."""


def build_runtime(rank, case):
    placement = csv_stage_ranks(case["csv"])
    num_stages = case["stages"]
    mine = sorted(s for s, r in placement.items() if r == rank)
    mods = {s: stage_module(s) for s in mine}
    old = release_tuple() < (2, 6)
    stage_kwargs = {"input_args": torch.zeros(ROWS, WIDTH, dtype=torch.float64)} if old else {}
    try:
        stages = [PipelineStage(mods[s], s, num_stages, torch.device("cpu"), **stage_kwargs)
                  for s in mine]
        kwargs = {"loss_fn": torch.nn.functional.mse_loss}
        if old:  # 2.5: the placement given, and B is a full backward unless the file has W
            with open(case["csv"]) as f:
                has_w = any(kind(S._Action.from_str(c).computation_type) == "W"
                            for row in csv.reader(f) for c in row if c.strip())
            kwargs.update(stage_index_to_group_rank=placement, use_full_backward=not has_w)
        sched = S._PipelineScheduleRuntime(stages, case["microbatches"], **kwargs)
        sched._load_csv(case["csv"], format=case["form"])
    except (ValueError, AssertionError, RuntimeError, NotImplementedError) as e:
        raise Refused(f"{type(e).__name__}: {e}") from e
    return mods, mine, sched


def run_case(rank, world, case):
    """One torch step of case's CSV on this rank; returns this rank's stages' gradients."""
    mods, mine, sched = build_runtime(rank, case)
    num_stages = case["stages"]
    if rank == 0:
        torch_simulate(sched)
    x, y = batch(case["microbatches"])
    args = (x,) if 0 in mine else ()
    kwargs = {"target": y, "losses": []} if num_stages - 1 in mine else {}
    sched.step(*args, **kwargs)
    return ({s: [p.grad.clone() if p.grad is not None else None for p in mods[s].parameters()]
             for s in mine}, bool(getattr(sched, "scale_grads", False)))


def worker(rank, world, cases, out_dir, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    results = []
    for case in cases:
        try:
            grads, scaled = run_case(rank, world, case)
            results.append({"name": case["name"], "grads": grads, "scaled": scaled})
        except Refused as e:
            results.append({"name": case["name"], "refused": str(e)})
        except Exception as e:  # a failed case leaves the group unusable: stop here
            results.append({"name": case["name"], "error": f"{type(e).__name__}: {e}",
                            "where": traceback.format_exc(limit=3)})
            break
        dist.barrier()
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def export_case(tp, name, k, m, v, form, out_dir):
    fname = f"{name}_k{k}_m{m}" + (f"_v{v}" if v else "") + f"_{form}.csv"
    path = os.path.join(out_dir, fname)
    cmd = [tp, "schedule", "-k", str(k), "-m", str(m), "-s", name, "--format", "torch-csv",
           "--torch-version", torch_release(), "-o", path]
    if v:
        cmd += ["-v", str(v)]
    if form == "compute_only":
        cmd.append("--compute-only")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 2:  # twinpipe says this release cannot take this form of the schedule
        return {"name": fname[:-4], "refused": r.stderr.strip().splitlines()[0], "devices": k,
                "microbatches": m, "kind": name, "form": form}
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    stages = len(csv_stage_ranks(path))
    return {"name": fname[:-4], "csv": path, "form": form, "stages": stages,
            "devices": k, "microbatches": m, "kind": name}


def control_case(case):
    """The oracle's control: case's compute+comms file without its gradient
    reductions, which a torch release from 2.11 on loads and runs without
    dividing the gradients by M (issue 38's silently wrong gradients). The
    comparison must catch it."""
    path = case["csv"][:-4] + "_no_reduce_grad.csv"
    with open(case["csv"], newline="") as f:
        rows = [[c for c in row if "REDUCE_GRAD" not in c] for row in csv.reader(f)]
    write_rows(path, rows)
    return dict(case, csv=path, name=case["name"] + "_no_reduce_grad", control=True)


def forward(tp, out_dir, table, port, forms=("compute_only", "compute_comms")):
    by_world = {}
    rows = []
    for name, cases in table.items():
        for k, m, v in cases:
            for form in forms:
                case = export_case(tp, name, k, m, v, form, out_dir)
                if "refused" in case:
                    rows.append({"case": case["name"], "kind": name, "form": form, "devices": k,
                                 "microbatches": m, "status": "twinpipe-refuses",
                                 "error": case["refused"]})
                    print(f"forward {case['name']:<40} twinpipe refuses to write it: {case['refused']}")
                    continue
                by_world.setdefault(k, []).append(case)
    if release_tuple() >= (2, 11) and 2 in by_world and any(
            c["form"] == "compute_comms" for c in by_world[2]):
        by_world[2].append(control_case(next(c for c in by_world[2] if c["form"] == "compute_comms")))
    for world, cases in sorted(by_world.items()):
        run_dir = tempfile.mkdtemp(dir=out_dir, prefix=f"w{world}-")
        mp.start_processes(worker, args=(world, cases, run_dir, port + world), nprocs=world,
                           join=True, start_method="spawn")
        per_rank = [torch.load(os.path.join(run_dir, f"rank{r}.pt"), weights_only=True)
                    for r in range(world)]
        for i, case in enumerate(cases):
            row = {"case": case["name"], "kind": case["kind"], "form": case["form"],
                   "devices": world, "microbatches": case["microbatches"], "stages": case["stages"]}
            got = [p[i] if i < len(p) else None for p in per_rank]
            errors = [g["error"] + "\n" + g["where"] for g in got if g is not None and "error" in g]
            refusals = [g["refused"] for g in got if g is not None and "refused" in g]
            if refusals and not errors:
                # torch's runtime of this release cannot take the case (2.5's needs two
                # stages per rank): recorded as such, not a failure of twinpipe's file
                row["status"] = "torch-refuses"
                row["error"] = refusals[0]
            elif errors or any(g is None for g in got):
                row["status"] = "fail"
                row["error"] = errors[0] if errors else "not run (an earlier case failed)"
            else:
                grads = {}
                for g in got:
                    grads.update(g["grads"])
                row["scale_grads"] = got[0]["scaled"]
                ref = reference_gradients(case["stages"], case["microbatches"], got[0]["scaled"])
                scale = max(float(t.abs().max()) for ts in ref.values() for t in ts)
                worst = 0.0
                for s, ts in ref.items():
                    for a, b in zip(ts, grads.get(s, [None] * len(ts))):
                        worst = max(worst, float("inf") if b is None else float((a - b).abs().max()) / scale)
                row["max_rel_error"] = worst
                if case.get("control"):  # must be caught: the gradients are M times too large
                    row["control"] = True
                    row["status"] = "ok" if worst > REL_TOL else "fail"
                    row["error"] = ("control caught: gradients M times too large without REDUCE_GRAD"
                                    if worst > REL_TOL else "control NOT caught: the oracle cannot fail")
                else:
                    row["status"] = "ok" if worst <= REL_TOL else "fail"
                    if worst > REL_TOL:
                        row["error"] = f"gradients differ from the unpipelined model's by {worst:.3g} (relative)"
            rows.append(row)
            print(f"forward {row['case']:<40} {row['status']:<5} "
                  + (f"max rel. gradient error {row['max_rel_error']:.2e}  " if "max_rel_error" in row
                   else "") + row.get("error", ""), flush=True)
    return rows


# ---------------------------------------------------------------- reverse ---
class MockStage:
    """What a schedule class reads of its stages to build its order."""
    def __init__(self, index, num_stages, group_size, group_rank):
        self.stage_index = index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.is_first = index == 0
        self.is_last = index == num_stages - 1
        self.submod = torch.nn.Identity()
        self.stage_index_to_group_rank = {}
        self.has_backward = True
        self.group = None

    def _prepare_forward_infra(self, *args, **kwargs):  # 2.5's schedules call these
        pass

    def _prepare_backward_infra(self, *args, **kwargs):
        pass


def torch_orders(cls_name, k, m):
    """(compute-only rows, compute+comms rows or None) of torch's class for K ranks, M micro-batches."""
    cls = getattr(S, cls_name)
    if issubclass(cls, S.PipelineScheduleMulti):
        v_shape = cls_name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")
        first = [0, 2 * k - 1] if v_shape else [0, k]
        sched = cls([MockStage(i, 2 * k, k, 0) for i in first], m)
        compute = [sched.pipeline_order[r] for r in range(k)]
        with_comms = getattr(sched, "pipeline_order_with_comms", None)  # 2.5: none
        comms = [with_comms[r] for r in range(k)] if with_comms else None
        return compute, comms
    sched = cls(MockStage(0, k, k, 0), m)
    if not hasattr(sched, "_get_pipeline_order"):
        raise NotImplementedError("this release has no _get_pipeline_order for a single-stage schedule")
    order = sched._get_pipeline_order()
    return [order[r] for r in range(k)], None


def write_rows(path, rows):
    with open(path, "w", newline="") as f:  # as torch's _dump_csv writes
        w = csv.writer(f)
        for row in rows:
            w.writerow(row)


def order_faults(rows, m):
    """What is wrong with a torch compute order, judged on its own: each stage
    must run F of every micro-batch 0..M-1 once, and its backward once, as B or
    as I and W (a schedule may mix the two across micro-batches). Empty when
    nothing is."""
    count = {}  # (stage, micro-batch) -> {kind: count}
    stages = set()
    for row in rows:
        for a in row:
            if a is None:
                continue
            for sub in subs(a):
                name = kind(sub.computation_type)
                if name in ("F", "B", "I", "W"):
                    stages.add(sub.stage_index)
                    c = count.setdefault((sub.stage_index, sub.microbatch_index), {})
                    c[name] = c.get(name, 0) + 1
    faults = []
    if release_tuple() < (2, 6):  # 2.5: B followed by a W of its own is the input backward
        for c in count.values():
            if c.get("W") and c.get("B"):
                c["I"] = c.pop("B")
    for stage in sorted(stages):
        beyond = sorted(mb for (s, mb) in count if s == stage and not 0 <= mb < m)
        if beyond:
            faults.append(f"stage {stage}: micro-batches {beyond} beyond M={m}")
        for mb in range(m):
            c = count.get((stage, mb), {})
            backward = (c.get("B", 0), c.get("I", 0), c.get("W", 0))
            if c.get("F", 0) != 1 or backward not in ((1, 0, 0), (0, 1, 1)):
                faults.append(f"stage {stage} micro-batch {mb}: F x{c.get('F', 0)}, "
                              f"B x{backward[0]}, I x{backward[1]}, W x{backward[2]}")
    return faults


def twinpipe_reads(tp, path, k, m, stages, out_dir):
    steps = []
    r = subprocess.run([tp, "verify", path], capture_output=True, text=True)
    steps.append(("verify", r))
    if r.returncode == 0:
        cfg = {"model": {"generator": "mlp", "layers": stages * 2, "width": 32, "input": 16, "classes": 4},
               "training": {"batch": m * 2, "microbatches": m, "optimizer": "sgd",
                            "learning_rate": 0.01, "seed": 1, "steps": 1},
               "pipeline": {"stages": k, "schedule": "gpipe", "recompute": "none",
                            "partition": "minmax"},
               "cluster": {"device": "CPU", "devices": k, "link": "inproc"}}
        cfg_path = path[:-4] + ".config.json"
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        for cmd in ("simulate", "execute"):
            r = subprocess.run([tp, cmd, cfg_path, "--schedule-file", path] +
                               (["--steps", "1"] if cmd == "execute" else []),
                               capture_output=True, text=True)
            steps.append((cmd, r))
            if r.returncode != 0:
                break
    return steps


def reverse(tp, out_dir):
    rows = []
    for cls_name in REVERSE_CLASSES:
        if not hasattr(S, cls_name):
            print(f"reverse {cls_name:<30} not in torch {torch.__version__}")
            continue
        for k, m in REVERSE_CASES:
            try:
                compute, comms = torch_orders(cls_name, k, m)
            except Exception as e:  # torch's class refuses (K, M): nothing to read
                print(f"reverse {cls_name:<30} K={k} M={m}: torch refuses ({type(e).__name__}: {e})")
                rows.append({"class": cls_name, "devices": k, "microbatches": m,
                             "status": "torch-refuses", "error": f"{type(e).__name__}: {e}"})
                continue
            faults = order_faults(compute, m)
            for form, order in (("compute_only", compute), ("compute_comms", comms)):
                if order is None:
                    continue
                path = os.path.join(out_dir, f"torch_{cls_name}_k{k}_m{m}_{form}.csv")
                write_rows(path, order)
                stages = len(csv_stage_ranks(path))
                steps = twinpipe_reads(tp, path, k, m, stages, out_dir)
                failed = [(c, r) for c, r in steps if r.returncode != 0]
                row = {"class": cls_name, "form": form, "devices": k, "microbatches": m,
                       "stages": stages, "steps": [c for c, _ in steps]}
                if faults:  # torch's order is wrong on its own: twinpipe must refuse it (exit 2)
                    row["torch_order_faults"] = faults
                    refused = failed and failed[0][0] == "verify" and failed[0][1].returncode == 2
                    row["status"] = "torch-order-invalid" if refused else "fail"
                    row["error"] = ("torch's order is wrong (" + "; ".join(faults[:2]) + "): "
                                    + ("twinpipe verify refuses it, exit 2" if refused
                                       else "twinpipe did NOT refuse it"))
                elif failed:
                    c, r = failed[0]
                    row["status"] = "fail"
                    row["error"] = f"twinpipe {c} exit {r.returncode}: {(r.stderr or r.stdout).strip()[:300]}"
                else:
                    row["status"] = "ok"
                rows.append(row)
                print(f"reverse {cls_name:<30} K={k} M={m} {form:<14} {row['status']:<5} "
                      + row.get("error", "verify, simulate, execute"), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("twinpipe")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="one case per schedule kind")
    ap.add_argument("--port", type=int, default=29610)
    ap.add_argument("--only", help="comma-separated schedule kinds (forward) to run, no reverse")
    ap.add_argument("--forms", default="compute_only,compute_comms",
                    help="which CSV forms to export: compute_only, compute_comms or both")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tp = os.path.abspath(args.twinpipe)
    print(f"torch {torch.__version__} (writing --torch-version {torch_release()}), "
          f"python {platform.python_version()}", flush=True)
    table = QUICK if args.quick else FORWARD_CASES
    if args.only:
        table = {k: FORWARD_CASES[k] for k in args.only.split(",")}
    fwd = forward(tp, args.out, table, args.port, tuple(args.forms.split(",")))
    rev = [] if args.only else reverse(tp, args.out)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    result = {"torch": torch.__version__, "torch_version_option": torch_release(),
              "python": platform.python_version(), "commit": commit,
              "command": " ".join(["python3", "scripts/torch_roundtrip.py"] + sys.argv[1:]),
              "forward": fwd, "reverse": rev}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    bad_f = [r for r in fwd if r["status"] == "fail"]
    bad_r = [r for r in rev if r["status"] == "fail"]
    controls = [r for r in fwd if r.get("control")]
    runs = [r for r in fwd if not r.get("control")]
    print(f"forward: {sum(r['status'] == 'ok' for r in runs)} of {len(runs)} twinpipe exports trained in torch "
          f"to the unpipelined gradients; {sum(r['status'] == 'torch-refuses' for r in runs)} refused by "
          f"torch's runtime, {sum(r['status'] == 'twinpipe-refuses' for r in runs)} not written (this release "
          f"cannot take them); {sum(r['status'] == 'ok' for r in controls)} of {len(controls)} "
          f"controls (no REDUCE_GRAD) caught")
    print(f"reverse: {sum(r['status'] == 'ok' for r in rev)} torch schedules read, verified, simulated and "
          f"executed; {sum(r['status'] == 'torch-order-invalid' for r in rev)} wrong on torch's side and "
          f"refused; {sum(r['status'] == 'torch-refuses' for r in rev)} (class, K, M) torch itself refuses; "
          f"{len(bad_r)} failed")
    return 1 if bad_f or bad_r else 0


if __name__ == "__main__":
    sys.exit(main())
