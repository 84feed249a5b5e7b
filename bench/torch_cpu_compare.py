#!/usr/bin/env python3
"""The CPU executor against PyTorch eager on one core (issue 19): the same
4-block transformer (d_model 256, seq 128, 4 heads, ffn 1024, vocab 1000,
batch 8, Adam), built by twinpipe's transformer generator and by PyTorch
layer for layer, each run pinned to the same core with one thread, warm
steps timed. Prints both step times and their ratio side by side, one row
per micro-batch count (the batch accumulated over M micro-batches, one Adam
step).

  python3 bench/torch_cpu_compare.py build/twinpipe [--core 0] [--steps 6] [--microbatches 1 4]

PyTorch is looked for in this Python, then in Debian's /usr/bin/python3
(`make bench-torch` installs python3-torch there when missing); without it
the PyTorch column is skipped with a message. The model, as
execute/layers/ builds it: token and learned position embeddings; pre-LN
blocks x + Attn(LN(x)), h + W2 GELU(W1 LN(h) + b1) + b2, attention with
biases on Q, K, V and the output (not causal), GELU in its tanh form; a
final layernorm and a biased vocabulary projection; softmax cross-entropy
over every token.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODEL = {"generator": "transformer", "layers": 4, "d_model": 256, "ffn": 1024, "heads": 4, "seq": 128,
         "vocab": 1000}
BATCH = 8

TORCH_CHILD = r"""
import json, statistics, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
m, steps = json.loads(sys.argv[1]), int(sys.argv[2])
micro_batches = int(sys.argv[3])
torch.set_num_threads(1)
torch.manual_seed(1)
d, f, h, s, v = m["d_model"], m["ffn"], m["heads"], m["seq"], m["vocab"]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, f), nn.Linear(f, d)
    def forward(self, x):
        b = x.shape[0]
        q, k, val = self.qkv(self.ln1(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
        x = x + self.proj((p @ val).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(v, d), nn.Parameter(torch.randn(s, d) * 0.02)
        self.blocks = nn.Sequential(*[Block() for _ in range(m["layers"])])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, v)
    def forward(self, ids):
        return self.head(self.ln(self.blocks(self.tok(ids) + self.pos)))

model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
ids = torch.randint(0, v, (%(batch)d, s))
labels = torch.randint(0, v, (%(batch)d, s))
times = []
for step in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    for chunk_ids, chunk_labels in zip(ids.chunk(micro_batches), labels.chunk(micro_batches)):
        loss = F.cross_entropy(model(chunk_ids).reshape(-1, v), chunk_labels.reshape(-1)) / micro_batches
        loss.backward()
    opt.step()
    times.append(time.perf_counter() - t0)
print(json.dumps({"step_time_s": statistics.median(times[2:]), "torch": torch.__version__}))
""" % {"batch": BATCH}


def pinned(core, *args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run(["taskset", "-c", str(core), *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args[:3])} ...: exit {out.returncode}: {out.stderr.strip()[-2000:]}")
    return out.stdout


def torch_python():
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("twinpipe")
    ap.add_argument("--core", type=int, default=0)
    ap.add_argument("--steps", type=int, default=6, help="steps per run; the first two are warm-up")
    ap.add_argument("--microbatches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    if a.steps < 3:
        sys.exit("--steps: at least 3 (two warm-up steps, then timed ones)")
    py = torch_python()
    if py is None:
        print("PyTorch not found (in this Python or /usr/bin/python3): its column is skipped; "
              "`make bench-torch` installs Debian's python3-torch")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for M in a.microbatches:
            config = {"model": MODEL,
                      "training": {"batch": BATCH, "microbatches": M, "optimizer": "adam", "seed": 1},
                      "pipeline": {"stages": 1, "schedule": "1f1b", "recompute": "none"},
                      "cluster": {"device": "CPU", "devices": 1, "link": "inproc"}}
            path = os.path.join(work, f"m{M}.json")
            json.dump(config, open(path, "w"))
            ours = json.loads(pinned(a.core, a.twinpipe, "execute", path, "--steps", str(a.steps), "--json"))
            row = {"microbatches": M, "twinpipe_ms": ours["step_time_s"] * 1e3}
            if py:
                theirs = json.loads(pinned(a.core, py, "-c", TORCH_CHILD, json.dumps(MODEL), str(a.steps), str(M)))
                row.update(torch_ms=theirs["step_time_s"] * 1e3, torch_version=theirs["torch"])
                row["ratio"] = row["twinpipe_ms"] / row["torch_ms"]
            rows.append(row)
    print(f"4-block transformer, batch {BATCH}, Adam, one thread on core {a.core}; ratio = twinpipe / PyTorch "
          f"(target <= 1)")
    print(f"{'micro-batches':>13}  {'twinpipe':>11}  {'PyTorch':>11}  {'ratio':>6}")
    for r in rows:
        torch_ms = f"{r['torch_ms']:8.1f} ms" if "torch_ms" in r else "   skipped"
        ratio = f"{r['ratio']:6.2f}" if "ratio" in r else "     -"
        print(f"{r['microbatches']:>13}  {r['twinpipe_ms']:8.1f} ms  {torch_ms:>11}  {ratio}")
    if a.json:
        json.dump({"rows": rows}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
