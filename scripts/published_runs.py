#!/usr/bin/env python3
"""Turns a vTrain ground-truth CSV (traces/published/vtrain-a100/) into a table
of runs for `twinpipe calibrate --runs` and `twinpipe validate`: one JSON line
per row, {"config": {...}, "step_time_s": ..., "row": N}.

Mapping (traces/published/vtrain-a100/README.md): the transformer generator
with the row's layers, hidden, heads and seq, FFN 4 x hidden, GPT-2's
vocabulary, fp16; training.batch = global_batch / data_parallel per replica,
micro-batches of micro_batch; Adam at 16 bytes per parameter; 1F1B with full
recompute; Megatron-LM's partition (an equal share of blocks per stage, the
embedding on the first, the head on the last); A100-80GB over NVLink3.
Rows with tensor parallelism (tensor_parallel > 1) are skipped until it is
modelled (issue 18), and counted on stderr.

  scripts/published_runs.py traces/published/vtrain-a100/single_node_layers_12_20.csv \
      [--layers 12] > runs.jsonl
"""
import argparse
import csv
import json
import sys


def config_of(row):
    layers, pp = int(row["layers"]), int(row["pipeline_parallel"])
    dp, mb = int(row["data_parallel"]), int(row["micro_batch"])
    batch = int(row["global_batch"]) // dp
    hidden = int(row["hidden"])
    # Layer 0 is the embedding, 1..layers the blocks, layers+1 the head.
    first = [0] + [1 + s * layers // pp for s in range(1, pp)]
    return {
        "model": {"generator": "transformer", "layers": layers, "d_model": hidden, "ffn": 4 * hidden,
                  "heads": int(row["heads"]), "seq": int(row["seq"]), "vocab": 50257, "dtype": "fp16",
                  "causal": True},
        "training": {"batch": batch, "microbatches": batch // mb, "optimizer": "adam", "bytes_per_param": 16},
        "pipeline": {"stages": pp, "schedule": "1f1b", "recompute": "full", "partition": "manual",
                     "first_layers": first},
        "cluster": {"device": "A100-80GB", "devices": dp * pp, "link": "nvlink3"},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--layers", type=int, action="append", help="keep only rows of these layer counts")
    a = ap.parse_args()
    skipped = kept = 0
    with open(a.csv, newline="") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            if int(row["tensor_parallel"]) != 1:
                skipped += 1
                continue
            if a.layers and int(row["layers"]) not in a.layers:
                continue
            print(json.dumps({"config": config_of(row), "step_time_s": float(row["iteration_time_ms"]) / 1e3,
                              "row": n}, sort_keys=True))
            kept += 1
    print(f"{a.csv}: {kept} runs; {skipped} rows with tensor parallelism skipped (not modelled yet)", file=sys.stderr)


if __name__ == "__main__":
    main()
