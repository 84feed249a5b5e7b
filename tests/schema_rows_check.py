#!/usr/bin/env python3
"""Every run Megatron-Core would train, written in the published schema, plans and predicts.

The held-out tables issue 36 is judged on come as whole files (`published_runs.py TABLE.csv >
runs.jsonl; twinpipe validate runs.jsonl`), and validate stops at the first run it cannot plan: one
legal row would fail the whole table. This draws 300 rows at random (a fixed seed) from what
Megatron-Core and NeMo accept: every device, precision, sharding, recompute, network and
overlap value of traces/published/h100-dgx-cloud/README.md's schema; Llama-, GPT-, Nemotron- and
Qwen-shaped blocks; tensor parallelism inside a node with the key/value heads split over it;
interleaved pipelines whose micro-batches need not be a multiple of the stages (Megatron-Core's
micro-batch groups, at least as many as the stages); context parallelism dividing the sequence
in 2c chunks; up to 16,384 GPUs. The table mixes device kinds. Each must convert and predict
(exit 0, a positive step time), and the predictions must be the same bytes twice.

  python3 tests/schema_rows_check.py TWINPIPE SOURCE_DIR   (ctest: scripts.schema_rows)
"""
import csv
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

COLUMNS = ("source,row_id,model,layers,hidden,heads,kv_heads,ffn,seq,vocab,norm,mlp,position,precision,gpu,gpus,"
           "gpus_per_node,inter_node,tp,pp,dp,cp,vp,sequence_parallel,data_parallel_sharding,tp_comm_overlap,"
           "recompute,micro_batch,global_batch,step_time_s,trust,provenance").split(",")
# layers, hidden, heads, kv_heads, ffn, norm, mlp, position, vocab
MODELS = [(32, 4096, 32, 8, 14336, "rmsnorm", "swiglu", "rope", 128256),       # Llama 3.1 8B
          (80, 8192, 64, 8, 28672, "rmsnorm", "swiglu", "rope", 128256),       # 70B
          (126, 16384, 128, 8, 53248, "rmsnorm", "swiglu", "rope", 128256),    # 405B
          (96, 12288, 96, 96, 49152, "layernorm", "gelu", "learned", 50257),   # GPT-3 175B
          (32, 6144, 48, 8, 24576, "layernorm", "squared-relu", "rope", 256000),  # Nemotron-4 15B
          (96, 18432, 96, 8, 73728, "layernorm", "squared-relu", "rope", 256000),  # Nemotron-4 340B
          (28, 3584, 28, 4, 18944, "rmsnorm", "swiglu", "rope", 152064),       # Qwen2 7B
          (24, 2048, 16, 16, 8192, "layernorm", "gelu", "learned", 50257)]     # GPT-3 1.3B
PRECISIONS = {"H100-SXM": ("bf16", "fp8"), "H200": ("bf16", "fp8"), "A100-80GB": ("bf16", "fp16")}


def rows(count, seed=36):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        layers, hidden, heads, kv_heads, ffn, norm, mlp, position, vocab = rng.choice(MODELS)
        gpu = rng.choice(sorted(PRECISIONS))
        tp, pp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3, 4, 6, 8, 12, 16])
        vp = 1 if pp == 1 else rng.choice([1, 1, 2, 3, 4, 5, 6, 8, 12])
        cp, seq = rng.choice([1, 1, 2, 4, 8]), rng.choice([2048, 4096, 8192, 16384, 32768, 131072])
        dp, mb = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 512]), rng.choice([1, 1, 1, 2, 4])
        micro_batches = rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 24, 36, 64, 128])
        if heads % tp or kv_heads % tp:  # Megatron splits the query groups over the tensor-parallel ranks
            continue
        if layers < pp * vp or seq % (2 * cp) or tp * pp * dp * cp > 16384:
            continue
        if vp > 1 and micro_batches < pp:  # Megatron-Core's groups hold K to M micro-batches
            continue
        sequence_parallel = "yes" if tp > 1 and rng.random() < 0.8 else "no"
        values = ["schema_rows_check", f"row-{len(out) + 1:03d}", "random", layers, hidden, heads, kv_heads, ffn,
                  seq, vocab, norm, mlp, position, rng.choice(PRECISIONS[gpu]), gpu, tp * pp * dp * cp, 8,
                  rng.choice(["ib-ndr", "ib-hdr", "roce"]), tp, pp, dp, cp, vp, sequence_parallel,
                  rng.choice(["none", "optimizer", "optimizer", "full"]), rng.choice(["yes", "unknown"]),
                  rng.choice(["none", "none", "selective", "full", "unknown"]), mb, micro_batches * dp * mb, 10.0,
                  "C", "drawn by tests/schema_rows_check.py"]
        out.append(dict(zip(COLUMNS, values)))
    return out


def main():
    twinpipe, source = sys.argv[1], Path(sys.argv[2])
    table = rows(300)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, COLUMNS)
            w.writeheader()
            w.writerows(table)
        converted = subprocess.run([sys.executable, str(source / "scripts" / "published_runs.py"), str(path)],
                                   capture_output=True, text=True)
        if converted.returncode != 0:
            sys.exit(f"published_runs.py refused a row Megatron-Core trains:\n{converted.stderr}")
        runs = Path(tmp) / "rows.jsonl"
        runs.write_text(converted.stdout)
        outputs = []
        for _ in range(2):
            v = subprocess.run([twinpipe, "validate", str(runs), "--json"], capture_output=True, text=True)
            if v.returncode != 0:
                sys.exit(f"validate refused the table (exit {v.returncode}):\n{v.stderr}")
            outputs.append(v.stdout)
    if outputs[0] != outputs[1]:
        sys.exit("two validations of the same table differ")
    result = json.loads(outputs[0])
    predicted = [r["predicted_s"] for r in result["rows"]]
    if len(predicted) != len(table) or not all(math.isfinite(p) and p > 0 for p in predicted):
        sys.exit(f"expected {len(table)} positive step times, got {len(predicted)}: {predicted[:5]} ...")
    kinds = sorted({g["value"] for g in result["groups"] if g["key"] == "device"})
    if kinds != sorted(PRECISIONS):
        sys.exit(f"expected the table's device kinds {sorted(PRECISIONS)} grouped, got {kinds}")
    groups = {(g["key"], g["value"]) for g in result["groups"]}
    uneven = sum(1 for r in table if int(r["vp"]) > 1 and (int(r["global_batch"]) // int(r["dp"])
                                                            // int(r["micro_batch"])) % int(r["pp"]))
    print(f"{len(predicted)} rows of the schema planned and predicted ({len(groups)} groups; "
          f"{uneven} interleaved with micro-batches no multiple of the stages; "
          f"step {min(predicted):.3g} to {max(predicted):.3g} s)")


if __name__ == "__main__":
    main()
