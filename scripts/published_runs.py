#!/usr/bin/env python3
"""Turns a vTrain ground-truth CSV (traces/published/vtrain-a100/) into a table
of runs for `twinpipe calibrate --runs` and `twinpipe validate`: one JSON line
per row, {"config": {...}, "step_time_s": ..., "row": N}.

Mapping (traces/published/vtrain-a100/README.md): the transformer generator
with the row's layers, hidden, heads and seq, FFN 4 x hidden, GPT-2's
vocabulary, fp16; training.batch = global_batch / data_parallel per replica,
micro-batches of micro_batch; Adam at 16 bytes per parameter; 1F1B with full
recompute as Megatron-LM runs it (the forward re-run inside the backward
call, once the gradient is in: "recompute_timing": "in-backward"; blocking
transfers: "p2p": "blocking"); Megatron-LM's partition (an equal share of
blocks per stage, the embedding on the first, the head on the last); A100-80GB over NVLink3, one
node of 8. Tensor parallelism t: pipeline.tensor_parallel = t (no sequence
parallelism: the runs predate it), t x dp x pp GPUs, and each GPU holding
50257 // t of the vocabulary (t x that in the config), as vTrain's own GPT
model splits it (src/model/gpt_modeling.py: vocab_size // world_size). The
rows agree: the 50257-column projection of t = 1 runs at the CUDA cores'
rate (71 TFLOP/s), while 2 GPUs' 25128-column halves run at 190 TFLOP/s,
which an odd width (Megatron's smallest padding, 25129) could not.

  scripts/published_runs.py traces/published/vtrain-a100/single_node_layers_12_20.csv \
      [--layers 12] [--tensor-parallel 1] > runs.jsonl
"""
import argparse
import csv
import json
import sys


def config_of(row):
    layers, pp, tp = int(row["layers"]), int(row["pipeline_parallel"]), int(row["tensor_parallel"])
    dp, mb = int(row["data_parallel"]), int(row["micro_batch"])
    batch = int(row["global_batch"]) // dp
    hidden = int(row["hidden"])
    # Layer 0 is the embedding, 1..layers the blocks, layers+1 the head.
    first = [0] + [1 + s * layers // pp for s in range(1, pp)]
    return {
        "model": {"generator": "transformer", "layers": layers, "d_model": hidden, "ffn": 4 * hidden,
                  "heads": int(row["heads"]), "seq": int(row["seq"]), "vocab": 50257 // tp * tp, "dtype": "fp16",
                  "causal": True},
        "training": {"batch": batch, "microbatches": batch // mb, "optimizer": "adam", "bytes_per_param": 16},
        "pipeline": {"stages": pp, "schedule": "1f1b", "recompute": "full", "partition": "manual",
                     "first_layers": first, "tensor_parallel": tp, "p2p": "blocking",
                     "recompute_timing": "in-backward"},
        "cluster": {"device": "A100-80GB", "devices": tp * dp * pp, "gpus_per_node": 8, "link": "nvlink3"},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--layers", type=int, action="append", help="keep only rows of these layer counts")
    ap.add_argument("--tensor-parallel", type=int, action="append", help="keep only rows of these tensor-parallel degrees")
    a = ap.parse_args()
    skipped = kept = 0
    with open(a.csv, newline="") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            if (a.layers and int(row["layers"]) not in a.layers) or \
               (a.tensor_parallel and int(row["tensor_parallel"]) not in a.tensor_parallel):
                skipped += 1
                continue
            print(json.dumps({"config": config_of(row), "step_time_s": float(row["iteration_time_ms"]) / 1e3,
                              "row": n}, sort_keys=True))
            kept += 1
    print(f"{a.csv}: {kept} runs ({skipped} rows left out by --layers / --tensor-parallel)", file=sys.stderr)


if __name__ == "__main__":
    main()
