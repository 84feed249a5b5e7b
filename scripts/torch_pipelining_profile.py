#!/usr/bin/env python3
"""Profiles real torch.distributed.pipelining steps, for the torch profiler
importer's fixtures (issue 38, point 4).

Runs, in processes of one machine joined by gloo on the CPU, a small MLP
pipeline (2 stages of 2 Linear+ReLU layers of width 256 per rank and chunk)
under each schedule below, one warm-up step and then one step under
torch.profiler, and writes per schedule and rank:
  OUT/SCHEDULE.rankR.json   torch.profiler's Chrome trace (export_chrome_trace)
and per multi-stage schedule the schedule torch ran:
  OUT/SCHEDULE.csv          _dump_csv(format="compute_comms"), one row per rank
Single-stage schedules (ScheduleGPipe, Schedule1F1B) label their compute
"Forward i" / "Backward i"; the multi-stage runtime labels every action
"PP:<action>" (schedules.py, _get_profiler_function_name).

  python3 scripts/torch_pipelining_profile.py --out DIR [--world 2] [--microbatches 4]
      [--device cpu|cuda] [--width 256] [--rows 16]

With --device cuda every rank runs on cuda:(rank mod GPUs) joined by NCCL,
and the profiler records the GPU's kernels too (ProfilerActivity.CUDA); NCCL
refuses two ranks on one GPU, so one GPU runs --world 1 (every stage on it).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed import pipelining as pp

WIDTH = 256
LAYERS_PER_STAGE = 2
ROWS_PER_MICROBATCH = 16
SCHEDULES = {  # name: (class, chunks per rank)
    "gpipe": ("ScheduleGPipe", 1),
    "1f1b": ("Schedule1F1B", 1),
    "interleaved": ("ScheduleInterleaved1F1B", 2),
    "zbv": ("ScheduleZBVZeroBubble", 2),
}


def stage_module(width):
    layers = []
    for _ in range(LAYERS_PER_STAGE):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def stage_ids(rank, world, chunks, name):
    if chunks == 1:
        return [rank]
    if name == "zbv":  # V shape: rank r holds stages r and 2 world - 1 - r
        return [rank, 2 * world - 1 - rank]
    return [rank + world * c for c in range(chunks)]  # looped


def worker(rank, world, name, micro, out, init_file, kind, width, rows):
    if kind == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    device = torch.device(kind, torch.cuda.current_device()) if kind == "cuda" else torch.device("cpu")
    dist.init_process_group("nccl" if kind == "cuda" else "gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    cls_name, chunks = SCHEDULES[name]
    cls = getattr(pp, cls_name)
    num_stages = world * chunks
    ids = stage_ids(rank, world, chunks, name)
    stages = [pp.PipelineStage(stage_module(width).to(device), s, num_stages, device) for s in ids]
    loss_fn = lambda output, target: torch.nn.functional.mse_loss(output, target)  # noqa: E731
    sched = cls(stages[0] if chunks == 1 else stages, n_microbatches=micro, loss_fn=loss_fn)
    x = torch.randn(micro * rows, width, device=device)
    y = torch.randn(micro * rows, width, device=device)

    def step():
        args = (x,) if 0 in ids else ()
        kwargs = {"target": y, "losses": []} if num_stages - 1 in ids else {}
        sched.step(*args, **kwargs)

    step()  # warm-up
    dist.barrier()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if kind == "cuda":
        torch.cuda.synchronize()
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step()
        if kind == "cuda":
            torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(out, f"{name}.rank{rank}.json"))
    if chunks > 1 and rank == 0:
        sched._dump_csv(os.path.join(out, f"{name}.csv"))
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--width", type=int, default=WIDTH)
    ap.add_argument("--rows", type=int, default=ROWS_PER_MICROBATCH, help="rows per micro-batch")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    info = {"torch": torch.__version__, "world": a.world, "microbatches": a.microbatches, "width": a.width,
            "layers_per_stage": LAYERS_PER_STAGE, "rows_per_microbatch": a.rows, "device": a.device, "runs": {}}
    if a.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
    for name in a.schedules.split(","):
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                mp.spawn(worker, args=(a.world, name, a.microbatches, a.out, os.path.join(tmp, "init"), a.device,
                                                a.width, a.rows),
                         nprocs=a.world, join=True)
                info["runs"][name] = {"class": SCHEDULES[name][0], "seconds": round(time.time() - t0, 2)}
            except Exception as e:  # one schedule's failure leaves the others
                info["runs"][name] = {"class": SCHEDULES[name][0], "error": str(e)[-2000:]}
        print(name, info["runs"][name], flush=True)
    json.dump(info, open(os.path.join(a.out, "runs.json"), "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
