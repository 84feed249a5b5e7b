#!/usr/bin/env python3
"""twinpipe's CUDA backend against PyTorch eager on the same GPU and MLP.

Trains the config's `mlp` model at K=1 (one stage, M micro-batches with
gradient accumulation, the config's optimizer) with twinpipe and with PyTorch,
and reports:
  - step-time ratio, twinpipe / PyTorch (target <= 1.0 at K=1);
  - executor overhead, (step time - busiest stream's summed op time) / step
    time, from twinpipe's measured trace (target < 3%);
  - the final losses of both (a sanity check: same model family, not the same
    initial weights).

  python3 bench/torch_compare.py build/twinpipe examples/quickstart.json \
      --steps 20 --precision fp32 --out traces/recorded/h100/torch_compare.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def twinpipe_run(binary, config, steps, precision, workdir):
    cfg = json.load(open(config))
    cfg["pipeline"].update({"stages": 1, "schedule": "gpipe"})
    cfg["pipeline"].pop("partition", None)
    cfg["cluster"] = {"device": "H100-SXM", "devices": 1, "link": "nvlink4"}
    path = os.path.join(workdir, "k1.json")
    json.dump(cfg, open(path, "w"))
    out = subprocess.run([binary, "execute", path, "--backend", "cuda", "--steps", str(steps), "--json",
                          "--precision", precision, "--force"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"twinpipe execute failed ({out.returncode}): {out.stderr.strip()}")
    result = json.loads(out.stdout)
    return cfg, result["step_time_s"], result["executor_overhead"], result["final_loss"]


def torch_run(cfg, steps, precision):
    import torch
    import torch.nn as nn
    m, t = cfg["model"], cfg["training"]
    width, norm, residual = m["width"], m.get("norm", "none"), m.get("residual", True)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = {"layernorm": nn.LayerNorm(width), "batchnorm": nn.BatchNorm1d(width)}.get(norm, nn.Identity())
            self.fc = nn.Linear(width, width)

        def forward(self, x):
            y = torch.relu(self.fc(self.norm(x)))
            return x + y if residual else y

    layers = [nn.Linear(m["input"], width), nn.ReLU()] + [Block() for _ in range(m["layers"] - 2)]
    layers.append(nn.Linear(width, m["classes"]))
    model = nn.Sequential(*layers).cuda()
    opt = (torch.optim.Adam(model.parameters(), lr=t["learning_rate"]) if t.get("optimizer", "sgd") == "adam"
           else torch.optim.SGD(model.parameters(), lr=t["learning_rate"], momentum=t.get("momentum", 0.9)))
    batch, micro = t["batch"], t["microbatches"]
    gen = torch.Generator(device="cuda").manual_seed(t.get("seed", 1))
    x = torch.randn(batch, m["input"], device="cuda", generator=gen)
    labels = torch.randint(0, m["classes"], (batch,), device="cuda", generator=gen)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    times, loss = [], 0.0
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        total = torch.zeros((), device="cuda")
        for xs, ys in zip(x.chunk(micro), labels.chunk(micro)):
            with autocast:
                out = model(xs)
            l = loss_fn(out.float(), ys) / batch
            l.backward()
            total += l.detach()
        opt.step()
        opt.zero_grad(set_to_none=False)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        loss = total.item()
    return statistics.median(times[1:] if len(times) > 1 else times), loss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("twinpipe")
    ap.add_argument("config")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    ap.add_argument("--out", help="write the figures as JSON here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        cfg, ours, overhead, our_loss = twinpipe_run(a.twinpipe, a.config, a.steps, a.precision, work)
    theirs, their_loss = torch_run(cfg, a.steps, a.precision)
    figures = {"config": a.config, "precision": a.precision, "steps": a.steps,
               "twinpipe_step_s": ours, "torch_step_s": theirs, "ratio": ours / theirs,
               "executor_overhead": overhead, "twinpipe_final_loss": our_loss, "torch_final_loss": their_loss}
    print(f"step time: twinpipe {ours * 1e3:.3f} ms, PyTorch eager {theirs * 1e3:.3f} ms, "
          f"ratio {ours / theirs:.3f} (target <= 1.0)")
    print(f"executor overhead {overhead * 100:.2f}% of the step (target < 3%)")
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        json.dump(figures, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
