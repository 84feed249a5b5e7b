#!/usr/bin/env python3
"""Turns a table of measured training steps (CSV) into a table of runs for
`twinpipe calibrate --runs` and `twinpipe validate`: one JSON line per row,
{"config": {...}, "step_time_s": ..., "row": N} (and "source": "FILE:N" for
the shared schema), N the row's line in the CSV.

  scripts/published_runs.py traces/published/h100-dgx-cloud/runs.csv > runs.jsonl
  scripts/published_runs.py traces/published/vtrain-a100/single_node_layers_12_20.csv \
      [--layers 12] [--tensor-parallel 1] > runs.jsonl

Two schemas, told apart by the header (or named with --schema):
  shared  the schema of every table of published runs the project is held
          against (traces/published/h100-dgx-cloud/README.md): columns
          layers, hidden, heads, kv_heads, ..., step_time_s. Read by column
          name; extra columns are ignored.
  vtrain  vTrain's ground-truth CSV (traces/published/vtrain-a100/): columns
          pipeline_parallel, ..., iteration_time_ms.
Bad input (a missing column, a value outside the schema's list, a
non-integer where an integer belongs, parallel degrees that do not multiply
to the GPUs, a batch that does not split, ...) is reported as
FILE:LINE: COLUMN: what was expected, got what, for every bad row, and the
script exits 2 having written nothing.

Shared schema -> config, per row:
- model: the transformer generator with the row's layers, d_model = hidden,
  heads, kv_heads, ffn, seq, mlp, norm and position; dtype = precision
  ("fp8": Transformer Engine's FP8 GEMMs, BF16 elsewhere); causal; attention
  "fused" (Megatron-Core with Transformer Engine runs flash attention);
  untied embeddings; the vocabulary padded as Megatron pads it
  (make_vocab_size_divisible_by 128 times tp: the next multiple of 128 x tp).
  Bias has no column: --bias auto (the default) puts biases on layernorm
  blocks (GPT-2/GPT-3, NeMo's gpt3) and none on rmsnorm blocks (Llama,
  Mistral, Nemotron); --bias yes / no sets it for every row.
- training: batch = global_batch / dp sequences per data-parallel replica
  (the cp ranks of a replica share its sequences), microbatches = batch /
  micro_batch; Adam at 18 bytes per parameter for bf16 and fp8 (bf16
  weights, fp32 gradients, fp32 master weights and two moments), 20 for fp16
  (Megatron's figure for fp16 weights and gradients); data_parallel_sharding
  as the column says (none, optimizer, full); with fp8, "fp8_params": true
  (NeMo's FP8 recipe keeps the weights in FP8, fp8_params, so Transformer
  Engine holds no FP8 copies beside BF16 ones and the distributed optimizer
  gathers them in FP8). No gradient_dtype (the schema has no column):
  Megatron-LM's default, fp32 gradients in bf16 and FP8 training, reduced
  in fp32 across the replicas; NeMo's recipes reduce in bf16
  (grad_reduce_in_fp32 false), which a config says with
  "gradient_dtype": "bf16" (traces/published/README.md measures both).
- pipeline: stages = pp; "interleaved" with chunks = vp when vp > 1, else
  "1f1b" with blocking transfers ("p2p": "blocking": Megatron's 1F1B waits
  for its sends and receives; Megatron-Core's interleaved schedule overlaps
  them, so the default stays there); tensor_parallel = tp; sequence_parallel
  as the column says when tp > 1, false when tp == 1 (it shards along the
  tensor-parallel group: nothing to shard); context_parallel = cp;
  tp_comm_overlap: yes -> true where tp > 1 with sequence parallelism, else
  false (NeMo's and Megatron-Bridge's comm-overlap setup turns it off there,
  with a warning: the userbuffers overlap the sequence-parallel
  collectives; the rows are counted on stderr); unknown -> true where tp > 1 with sequence
  parallelism (--tp-comm-overlap-unknown on, the default: Transformer
  Engine's userbuffers overlap needs both, and every NeMo and Megatron-Core
  performance recipe whose config we read sets it there: the 40 such
  "unknown" rows of the shared table and the 108 held-out rows), else false;
  --tp-comm-overlap-unknown off reads unknown as Megatron's default, off;
  recompute none / selective / full,
  unknown -> "none" (Megatron's default; the rows are counted on stderr),
  with "recompute_granularity": "layer" when full; "recompute_timing":
  "in-backward" (Megatron re-runs the forward inside the backward call).
  Partition "megatron" (the product's Megatron-Core split): the blocks cut into pp x vp
  equal cells in model order (cell c of the interleaved schedule is chunk
  c // pp on pipeline rank c % pp), the embedding (layer 0) with the first
  cell's blocks and the head (layer layers + 1) with the last cell's; where
  pp x vp does not divide the blocks, each of the first (layers mod pp x vp)
  cells takes one block more, unless layers + 2 divides evenly: then the
  split is Megatron-Core's that counts the embedding and the loss as a
  block each ("account_for_embedding" and "account_for_loss": Megatron's
  account_for_embedding_in_pipeline_split and
  account_for_loss_in_pipeline_split, as NeMo 2's Llama 3.1 405B recipe
  sets them; the schema has no column for it), each cell (layers + 2) /
  (pp x vp) slots, the embedding one of the first's and the head one of
  the last's. A row with fewer blocks than that split needs is refused.
- cluster: device = gpu (A100-80GB, H100-SXM, H200: catalogue names),
  devices = gpus, gpus_per_node; link nvlink3 inside an A100 node, nvlink4
  inside an H100 or H200 node; inter_node_link = inter_node (ib-hdr,
  ib-ndr, roce); placement "tp-cp-dp-pp" (Megatron-Core's rank order: the
  replicas of a pipeline stage sit beside each other, its stages apart).
A row is checked for: gpus = tp x pp x dp x cp; global_batch a multiple of
dp x micro_batch; kv_heads dividing heads; vp = 1 when pp = 1 (virtual
stages interleave a pipeline of two or more ranks); at least pp x vp
blocks (2 fewer where the embedding and the loss take a slot each); a
positive, finite step_time_s. What the config loader checks beyond these
(tp dividing heads, kv_heads and ffn; a tensor-parallel group inside a
node) it reports itself, at the JSON path, when the table is read.

vTrain -> config (traces/published/vtrain-a100/README.md): the transformer
generator with the row's layers, hidden, heads and seq, FFN 4 x hidden,
GPT-2's vocabulary, fp16; training.batch = global_batch / data_parallel per
replica, micro-batches of micro_batch; Adam at 16 bytes per parameter; 1F1B
with full recompute as Megatron-LM runs it (the forward re-run inside the
backward call, once the gradient is in: "recompute_timing": "in-backward";
blocking transfers: "p2p": "blocking"); Megatron-LM's partition (an equal
share of blocks per stage, the embedding on the first, the head on the
last; stage s starts at block 1 + s x layers // pp); A100-80GB over NVLink3,
one node of 8. Tensor parallelism t: pipeline.tensor_parallel = t (no
sequence parallelism: the runs predate it), t x dp x pp GPUs, and each GPU
holding 50257 // t of the vocabulary (t x that in the config), as vTrain's
own GPT model splits it (src/model/gpt_modeling.py: vocab_size //
world_size). The rows agree: the 50257-column projection of t = 1 runs at
the CUDA cores' rate (71 TFLOP/s), while 2 GPUs' 25128-column halves run at
190 TFLOP/s, which an odd width (Megatron's smallest padding, 25129) could
not.

--layers and --tensor-parallel keep only the rows of those layer counts and
tensor-parallel degrees (both schemas); --gpu only the rows on those device
kinds (a table may mix kinds: validate predicts each run with its own
kind's calibration, while calibrate --runs fits one kind's profile).
"""
import argparse
import csv
import json
import math
import re
import sys

SHARED_COLUMNS = (
    "layers", "hidden", "heads", "kv_heads", "ffn", "seq", "vocab", "norm", "mlp", "position", "precision",
    "gpu", "gpus", "gpus_per_node", "inter_node", "tp", "pp", "dp", "cp", "vp", "sequence_parallel",
    "data_parallel_sharding", "tp_comm_overlap", "recompute", "micro_batch", "global_batch", "step_time_s")
VTRAIN_COLUMNS = (
    "pipeline_parallel", "tensor_parallel", "data_parallel", "hidden", "heads", "layers", "seq", "micro_batch",
    "global_batch", "iteration_time_ms")

# The shared schema's lists (traces/published/h100-dgx-cloud/README.md).
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu", "squared-relu")
POSITIONS = ("learned", "rope")
PRECISIONS = ("fp16", "bf16", "fp8")
INTRA_NODE_LINK = {"A100-80GB": "nvlink3", "H100-SXM": "nvlink4", "H200": "nvlink4"}
INTER_NODE_LINKS = ("ib-hdr", "ib-ndr", "roce")
YES_NO = ("yes", "no")
SHARDINGS = ("none", "optimizer", "full")
OVERLAPS = ("yes", "unknown")
RECOMPUTES = ("none", "selective", "full", "unknown")

VOCAB_DIVISIBLE_BY = 128  # Megatron's make_vocab_size_divisible_by


class BadInput(Exception):
    """A problem with the input, as one line: FILE:LINE: COLUMN: what was expected."""


class Row:
    """One CSV row: its fields read by column name, each problem naming the file, line and column."""

    def __init__(self, fields, source, line):
        self.fields, self.source, self.line = fields, source, line

    def fail(self, column, message):
        raise BadInput(f"{self.source}:{self.line}: {column}: {message}")

    def text(self, column):
        value = self.fields.get(column)
        if value is None:  # the row is shorter than the header
            self.fail(column, "expected a value, but the row ends before this column")
        return value.strip()

    def integer(self, column, least=1):
        value = self.text(column)
        if not re.fullmatch(r"[0-9]+", value) or not least <= int(value) <= MOST_INTEGER:
            self.fail(column, f"expected an integer from {least} to {MOST_INTEGER}, got {value!r}")
        return int(value)

    def choice(self, column, choices):
        value = self.text(column)
        if value not in choices:
            self.fail(column, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def seconds(self, column, scale=1.0):
        value = self.text(column)
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and 0 < number / scale <= 1e6):  # as a run table holds (validate)
            self.fail(column, f"expected a positive number of at most 1e6 s, got {value!r}")
        return number / scale


def accounts_for_embedding_and_loss(blocks, cells):
    """Whether Megatron-Core lays the blocks out with the embedding and the loss as a block's slot each
    (account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split): the one even split
    when the blocks do not divide among the cells but the blocks and those two do (NeMo 2's Llama 3.1
    405B: 126 blocks on 8 x 8 cells, its 30-block proxy on 4 x 8). The schema has no column for it."""
    return blocks % cells != 0 and (blocks + 2) % cells == 0


def padded_vocab(vocab, tp):
    """Megatron's padded vocabulary: the next multiple of make_vocab_size_divisible_by x tp."""
    step = VOCAB_DIVISIBLE_BY * tp
    return -(-vocab // step) * step


def megatron_layout(pp, vp, tp, cp, sequence_parallel, overlap, recompute, layers, gpu, gpus, gpus_per_node,
                    inter_node):
    """The pipeline and cluster sections of a Megatron-Core run (see the docstring's shared schema)."""
    pipeline = {"stages": pp, "schedule": "interleaved" if vp > 1 else "1f1b", "tensor_parallel": tp,
                "sequence_parallel": tp > 1 and sequence_parallel, "context_parallel": cp,
                "tp_comm_overlap": overlap, "recompute": recompute, "recompute_timing": "in-backward",
                "partition": "megatron"}
    # Megatron-Core's even split of the blocks, the first cells one more where they do not divide (the
    # product's megatron partition); the embedding and the loss a slot each where only then it is even.
    if accounts_for_embedding_and_loss(layers, pp * vp):
        pipeline["account_for_embedding"] = pipeline["account_for_loss"] = True
    if vp > 1:
        pipeline["chunks"] = vp
    else:
        pipeline["p2p"] = "blocking"
    if recompute == "full":
        pipeline["recompute_granularity"] = "layer"
    cluster = {"device": gpu, "devices": gpus, "gpus_per_node": gpus_per_node, "link": INTRA_NODE_LINK[gpu],
               "inter_node_link": inter_node, "placement": "tp-cp-dp-pp"}
    return pipeline, cluster


class Counts:
    """What the shared schema's conversion had to assume, for the stderr summary."""

    def __init__(self):
        self.recompute_unknown = self.overlap_unknown_on = self.overlap_unknown_off = 0
        self.sequence_parallel_tp1 = self.grouped_unknown = self.overlap_yes_off = 0


def shared_config(row, bias, counts, overlap_unknown="on"):
    layers, hidden, heads, kv_heads = (row.integer(c) for c in ("layers", "hidden", "heads", "kv_heads"))
    ffn, seq, vocab = (row.integer(c) for c in ("ffn", "seq", "vocab"))
    norm, mlp, position = row.choice("norm", NORMS), row.choice("mlp", MLPS), row.choice("position", POSITIONS)
    precision = row.choice("precision", PRECISIONS)
    gpu = row.choice("gpu", tuple(INTRA_NODE_LINK))
    gpus, gpus_per_node = row.integer("gpus"), row.integer("gpus_per_node")
    inter_node = row.choice("inter_node", INTER_NODE_LINKS)
    tp, pp, dp, cp, vp = (row.integer(c) for c in ("tp", "pp", "dp", "cp", "vp"))
    sequence_parallel = row.choice("sequence_parallel", YES_NO)
    sharding = row.choice("data_parallel_sharding", SHARDINGS)
    overlap = row.choice("tp_comm_overlap", OVERLAPS)
    recompute = row.choice("recompute", RECOMPUTES)
    micro_batch, global_batch = row.integer("micro_batch"), row.integer("global_batch")
    step_time_s = row.seconds("step_time_s")

    if heads % kv_heads:
        row.fail("kv_heads", f"expected a divisor of heads ({heads}): each K/V head serves a whole group of query "
                             f"heads, got {kv_heads}")
    if gpus != tp * pp * dp * cp:
        row.fail("gpus", f"expected tp x pp x dp x cp = {tp} x {pp} x {dp} x {cp} = {tp * pp * dp * cp}, got {gpus}")
    if global_batch % (dp * micro_batch):
        row.fail("global_batch", f"expected a multiple of dp x micro_batch = {dp} x {micro_batch} = "
                                 f"{dp * micro_batch} (whole micro-batches per data-parallel replica), got "
                                 f"{global_batch}")
    if vp > 1 and pp == 1:
        row.fail("vp", f"expected 1 when pp is 1 (virtual stages interleave a pipeline of two or more ranks), got {vp}")
    cells = pp * vp
    if layers < cells and not accounts_for_embedding_and_loss(layers, cells):
        row.fail("layers", f"expected at least pp x vp = {pp} x {vp} = {cells} blocks (one per cell), or 2 fewer "
                           f"when the embedding and the loss take a cell's slot each, got {layers}")

    if recompute == "unknown":
        counts.recompute_unknown += 1
        recompute = "none"
    overlapped = overlap == "yes"
    if overlapped and not (tp > 1 and sequence_parallel == "yes"):
        overlapped = False
        counts.overlap_yes_off += 1
    if overlap == "unknown":
        overlapped = overlap_unknown == "on" and tp > 1 and sequence_parallel == "yes"
        if overlapped:
            counts.overlap_unknown_on += 1
        else:
            counts.overlap_unknown_off += 1
    if tp == 1 and sequence_parallel == "yes":
        counts.sequence_parallel_tp1 += 1
    batch = global_batch // dp
    model = {"generator": "transformer", "layers": layers, "d_model": hidden, "heads": heads, "kv_heads": kv_heads,
             "ffn": ffn, "seq": seq, "vocab": padded_vocab(vocab, tp), "dtype": precision, "causal": True,
             "attention": "fused", "mlp": mlp, "norm": norm, "position": position,
             "bias": norm == "layernorm" if bias == "auto" else bias == "yes", "tied_embeddings": False}
    training = {"batch": batch, "microbatches": batch // micro_batch, "optimizer": "adam",
                "bytes_per_param": 20 if precision == "fp16" else 18, "data_parallel_sharding": sharding}
    if precision == "fp8":
        training["fp8_params"] = True
    pipeline, cluster = megatron_layout(pp, vp, tp, cp, sequence_parallel == "yes", overlapped, recompute,
                                        layers, gpu, gpus, gpus_per_node, inter_node)
    config = {"model": model, "training": training, "pipeline": pipeline, "cluster": cluster}
    return config, step_time_s, layers, tp


def vtrain_config(row, bias, counts):
    layers, pp, tp = row.integer("layers"), row.integer("pipeline_parallel"), row.integer("tensor_parallel")
    dp, mb = row.integer("data_parallel"), row.integer("micro_batch")
    global_batch = row.integer("global_batch")
    if global_batch % (dp * mb):
        row.fail("global_batch", f"expected a multiple of data_parallel x micro_batch = {dp} x {mb} = {dp * mb}, "
                                 f"got {global_batch}")
    if layers < pp:
        row.fail("layers", f"expected at least pipeline_parallel = {pp} blocks (one per stage), got {layers}")
    batch = global_batch // dp
    hidden = row.integer("hidden")
    heads, seq = row.integer("heads"), row.integer("seq")
    step_time_s = row.seconds("iteration_time_ms", scale=1e3)
    # Layer 0 is the embedding, 1..layers the blocks, layers+1 the head.
    first = [0] + [1 + s * layers // pp for s in range(1, pp)]
    config = {
        "model": {"generator": "transformer", "layers": layers, "d_model": hidden, "ffn": 4 * hidden,
                  "heads": heads, "seq": seq, "vocab": 50257 // tp * tp, "dtype": "fp16",
                  "causal": True},
        "training": {"batch": batch, "microbatches": batch // mb, "optimizer": "adam", "bytes_per_param": 16},
        "pipeline": {"stages": pp, "schedule": "1f1b", "recompute": "full", "partition": "manual",
                     "first_layers": first, "tensor_parallel": tp, "p2p": "blocking",
                     "recompute_timing": "in-backward"},
        "cluster": {"device": "A100-80GB", "devices": tp * dp * pp, "gpus_per_node": 8, "link": "nvlink3"},
    }
    return config, step_time_s, layers, tp


MOE_COLUMNS = (
    "layers", "hidden", "heads", "kv_heads", "head_dim", "attention", "dense_ffn_hidden", "moe_ffn_hidden",
    "num_experts", "topk", "shared_experts", "moe_layer_pattern", "vocab", "seq_len", "arch_notes", "precision",
    "gpu", "n_gpus", "gpus_per_node", "interconnect", "tp", "pp", "ep", "etp", "cp", "dp", "edp", "vp",
    "seq_parallel", "dist_opt_zero", "recompute", "mbs", "gbs", "token_drop_capacity", "dispatcher",
    "grouped_gemm", "other_opts", "value", "unit", "derived_step_time_s")
GPU_NAMES = (("H100-SXM", "H100-SXM"), ("H100 SXM", "H100-SXM"), ("H200", "H200"), ("A100-SXM4-80GB", "A100-80GB"),
             ("A100-80GB", "A100-80GB"))


# The largest count a config holds (a 32-bit integer, as its loader reads them).
MOST_INTEGER = 2**31 - 1


def leading_int(row, column, least=1, empty=None):
    """The integer a free-text field starts with ("128256 (Llama-3 tokenizer as proxy)"); `empty` if blank."""
    value = row.text(column)
    if not value and empty is not None:
        return empty
    m = re.match(r"\s*([0-9]+)\b", value)
    if not m or not least <= int(m.group(1)) <= MOST_INTEGER:
        row.fail(column, f"expected an integer from {least} to {MOST_INTEGER} (possibly followed by a note), "
                         f"got {value!r}")
    return int(m.group(1))


def moe_config(row, bias, counts):
    """The MoE runs schema (traces/published/moe-dgx-cloud/README.md): its free-text columns read by their
    documented meaning; what cannot be read names its column."""
    layers, hidden, heads, kv_heads = (row.integer(c) for c in ("layers", "hidden", "heads", "kv_heads"))
    head_dim = row.integer("head_dim")
    if head_dim * heads != hidden:
        row.fail("head_dim", f"expected hidden / heads = {hidden} / {heads} (the generator's heads split the model "
                             f"width), got {head_dim}")
    attention = row.text("attention").lower()
    if "mla" in attention or "latent" in attention:
        row.fail("attention", f"multi-head latent attention is not modelled yet, got {row.text('attention')!r}")
    position = "rope" if "rope" in attention or "rotary" in attention else "learned"
    experts, top_k = row.integer("num_experts"), row.integer("topk")
    moe_ffn, shared = row.integer("moe_ffn_hidden"), row.integer("shared_experts", least=0)
    pattern = row.text("moe_layer_pattern").lower()
    every = re.fullmatch(r"every (?:layer|block)(?: moe)?|all(?: layers)?", pattern)
    nth = re.fullmatch(r"every (\d+)(?:st|nd|rd|th)? (?:layer|block)s?(?: moe)?", pattern)
    if every:
        moe_every = 1
    elif nth:
        moe_every = int(nth.group(1))
    else:
        row.fail("moe_layer_pattern", f"expected 'every layer MoE' or 'every N layers', got {row.text('moe_layer_pattern')!r}")
    dense_ffn = leading_int(row, "dense_ffn_hidden", empty=0)
    if moe_every > 1 and not dense_ffn:
        row.fail("dense_ffn_hidden", "expected the dense blocks' FFN width: not every block is MoE")
    vocab, seq = leading_int(row, "vocab"), row.integer("seq_len")
    notes = row.text("arch_notes").lower()
    norm = "rmsnorm" if "rmsnorm" in notes else "layernorm" if "layernorm" in notes else None
    if norm is None:
        row.fail("arch_notes", f"expected the norm (RMSNorm or LayerNorm) among the notes, got {row.text('arch_notes')!r}")
    if "squared" in notes and "relu" in notes:
        mlp = "squared-relu"
    elif any(w in notes for w in ("geglu", "swiglu", "silu", "gated")):
        mlp = "swiglu"  # gated: three GEMMs whatever the activation
    elif "gelu" in notes:
        mlp = "gelu"
    else:
        row.fail("arch_notes", f"expected the MLP's activation among the notes, got {row.text('arch_notes')!r}")
    has_bias = ("bias" in notes and "no bias" not in notes) if "bias" in notes else (norm == "layernorm")
    if bias != "auto":
        has_bias = bias == "yes"
    precision_text = row.text("precision")
    precision = precision_text.split()[0].lower() if precision_text else ""
    if precision not in PRECISIONS:
        row.fail("precision", f"expected BF16, FP8 or FP16 (and a note), got {precision_text!r}")
    gpu_text = row.text("gpu")
    gpu = next((name for prefix, name in GPU_NAMES if gpu_text.startswith(prefix)), None)
    if gpu is None:
        row.fail("gpu", f"expected one of {', '.join(p for p, _ in GPU_NAMES)} (and a note), got {gpu_text!r}")
    gpus, gpus_per_node = row.integer("n_gpus"), row.integer("gpus_per_node")
    fabric = row.text("interconnect").lower()
    inter_node = ("roce" if "roce" in fabric else "ib-ndr" if "400gb" in fabric or "ndr" in fabric
                  else "ib-hdr" if "200gb" in fabric or "hdr" in fabric else None)
    if inter_node is None:
        row.fail("interconnect", f"expected the inter-node fabric (400Gb/s or NDR InfiniBand, 200Gb/s or HDR, RoCE), "
                                 f"got {row.text('interconnect')!r}")
    tp, pp, ep, etp, cp, dp, edp = (row.integer(c) for c in ("tp", "pp", "ep", "etp", "cp", "dp", "edp"))
    vp = leading_int(row, "vp", empty=1)
    sequence_parallel = row.choice("seq_parallel", YES_NO)
    optimizer = row.text("dist_opt_zero").lower()
    sharding = ("full" if "fsdp" in optimizer or "zero-3" in optimizer or "zero3" in optimizer
                else "optimizer" if "distributed" in optimizer or "dist-opt" in optimizer or "zero-1" in optimizer
                else "none" if optimizer in ("none", "no", "") else None)
    if sharding is None:
        row.fail("dist_opt_zero", f"expected the distributed optimizer, FSDP / ZeRO-3 or none, got {row.text('dist_opt_zero')!r}")
    recompute = row.text("recompute").split(" ")[0].lower()
    if recompute not in ("none", "selective", "full"):
        row.fail("recompute", f"expected none, selective or full (and a note), got {row.text('recompute')!r}")
    micro_batch, global_batch = row.integer("mbs"), row.integer("gbs")
    capacity_text = row.text("token_drop_capacity").lower()
    capacity = 0.0
    if "dropless" not in capacity_text and capacity_text not in ("", "none", "no"):
        m = re.search(r"capacity(?:[ _]factor)?\s*[=:]?\s*([0-9.]+)", capacity_text)
        if not m:
            row.fail("token_drop_capacity", f"expected 'dropless' or a capacity factor, got {row.text('token_drop_capacity')!r}")
        # Padded to the capacity, each expert runs exactly that many; dropping
        # without padding leaves balanced routing's tokens as they are.
        capacity = float(m.group(1)) if "pad" in capacity_text else 0.0
    dispatcher = row.text("dispatcher").lower()
    if not dispatcher.startswith(("alltoall", "allgather")):
        row.fail("dispatcher", f"expected alltoall or allgather (Megatron-Core's dispatchers modelled), "
                               f"got {row.text('dispatcher')!r}")
    grouped_text = row.text("grouped_gemm").lower()
    said_no = re.match(r"no\b", grouped_text) is not None
    if re.match(r"yes\b", grouped_text):
        grouped = True
    elif said_no or "unknown" in grouped_text or "not set" in grouped_text:
        grouped = False  # Megatron-Core's moe_grouped_gemm defaults to False
        if not said_no:
            counts.grouped_unknown += 1
    else:
        row.fail("grouped_gemm", f"expected yes, no or unknown (and a note), got {row.text('grouped_gemm')!r}")
    overlap = "tp comm overlap" in row.text("other_opts").lower()
    derived = row.text("derived_step_time_s")
    if derived:
        step_time_s = row.seconds("derived_step_time_s")
    else:
        unit = row.text("unit")
        if unit not in ("s", "ms"):
            row.fail("unit", f"expected s or ms, got {unit!r}")
        step_time_s = row.seconds("value", scale=1e3 if unit == "ms" else 1.0)

    if heads % kv_heads:
        row.fail("kv_heads", f"expected a divisor of heads ({heads}), got {kv_heads}")
    if gpus != tp * pp * dp * cp:
        row.fail("n_gpus", f"expected tp x pp x dp x cp = {tp} x {pp} x {dp} x {cp} = {tp * pp * dp * cp}, got {gpus}")
    if etp * ep * edp != tp * cp * dp:
        row.fail("edp", f"expected etp x ep x edp = tp x cp x dp = {tp * cp * dp} (the expert layers' split of a "
                        f"pipeline stage's GPUs), got {etp} x {ep} x {edp}")
    if global_batch % (dp * micro_batch):
        row.fail("gbs", f"expected a multiple of dp x mbs = {dp * micro_batch}, got {global_batch}")
    cells = pp * vp
    if layers < cells:
        row.fail("layers", f"expected at least pp x vp = {cells} blocks, got {layers}")
    batch = global_batch // dp
    model = {"generator": "transformer", "layers": layers, "d_model": hidden, "heads": heads, "kv_heads": kv_heads,
             "ffn": dense_ffn or moe_ffn, "seq": seq, "vocab": padded_vocab(vocab, tp), "dtype": precision,
             "causal": True, "attention": "fused", "mlp": mlp, "norm": norm, "position": position,
             "bias": has_bias, "tied_embeddings": "tied" in notes and "untied" not in notes,
             "experts": experts, "top_k": top_k, "moe_ffn": moe_ffn, "shared_experts": shared,
             "moe_every": moe_every, "capacity_factor": capacity, "grouped_gemm": grouped}
    if dispatcher.startswith("allgather"):
        model["dispatcher"] = "allgather"
    training = {"batch": batch, "microbatches": batch // micro_batch, "optimizer": "adam",
                "bytes_per_param": 20 if precision == "fp16" else 18, "data_parallel_sharding": sharding}
    if precision == "fp8" and "fp8_params=true" in precision_text.lower().replace(" ", ""):
        training["fp8_params"] = True
    pipeline, cluster = megatron_layout(pp, vp, tp, cp, sequence_parallel == "yes",
                                        overlap and tp > 1 and sequence_parallel == "yes", recompute, layers, gpu,
                                        gpus, gpus_per_node, inter_node)
    pipeline.update({"expert_parallel": ep, "expert_tensor_parallel": etp})
    return {"model": model, "training": training, "pipeline": pipeline, "cluster": cluster}, step_time_s, layers, tp


SCHEMAS = {"shared": (SHARED_COLUMNS, shared_config), "vtrain": (VTRAIN_COLUMNS, vtrain_config),
           "moe": (MOE_COLUMNS, moe_config)}


def detect_schema(header):
    """vTrain's CSV times its iterations in milliseconds; the MoE schema names its experts; everything else is
    read as the shared schema."""
    if "iteration_time_ms" in header:
        return "vtrain"
    return "moe" if "num_experts" in header else "shared"


def convert(path, schema, bias, layers_kept, tp_kept, overlap_unknown="on", gpus_kept=None):
    """Returns (lines of JSON, summary for stderr); raises BadInput with every problem, one per line."""
    try:
        f = open(path, newline="", encoding="utf-8-sig")
    except OSError as e:
        raise BadInput(f"{path}: cannot read it: {e.strerror}") from None
    with f:
        reader = csv.reader(f)
        try:
            header = [name.strip() for name in next(reader, [])]
            if not header:
                raise BadInput(f"{path}:1: expected a header of column names, got an empty file")
            schema = schema if schema != "auto" else detect_schema(header)
            columns, config_of = SCHEMAS[schema]
            options = {"overlap_unknown": overlap_unknown} if schema == "shared" else {}
            problems = [f"{path}:1: {name}: the column is named twice" for i, name in enumerate(header)
                        if name in columns and name in header[:i]]
            missing = [name for name in columns if name not in header]
            problems += [f"{path}:1: {name}: missing column" for name in missing]
            if missing:
                problems.append(f"{path}:1: the {schema} schema's columns are {', '.join(columns)}")
            if problems:
                raise BadInput("\n".join(problems))
            out, counts, skipped, kinds = [], Counts(), 0, []
            for values in reader:
                if not any(v.strip() for v in values):
                    continue
                # The row's first line: quoted fields may hold line breaks.
                line = reader.line_num - sum(v.count("\n") for v in values)
                row = Row(dict(zip(header, values)), path, line)
                counted = dict(vars(counts))  # a row left out below counts in no reading
                try:
                    if len(values) > len(header):
                        row.fail(f"field {len(header) + 1}", f"expected {len(header)} fields as the header names, "
                                                             f"got {len(values)}")
                    config, step_time_s, layers, tp = config_of(row, bias, counts, **options)
                except BadInput as e:
                    problems.append(str(e))
                    continue
                gpu = config["cluster"]["device"]
                if gpu not in kinds:
                    kinds.append(gpu)
                if ((layers_kept and layers not in layers_kept) or (tp_kept and tp not in tp_kept)
                        or (gpus_kept and gpu not in gpus_kept)):
                    skipped += 1
                    vars(counts).update(counted)
                    continue
                run = {"config": config, "step_time_s": step_time_s, "row": line}
                if schema in ("shared", "moe"):
                    run["source"] = f"{path}:{line}"
                out.append(json.dumps(run, sort_keys=True))
        except (csv.Error, UnicodeDecodeError) as e:
            raise BadInput(f"{path}:{reader.line_num}: not a readable CSV: {e}") from None
    problems += [f"{path}: --gpu {name}: no row is on it (the table's: {', '.join(kinds)})"
                 for name in gpus_kept or [] if name not in kinds]
    if problems:
        raise BadInput("\n".join(problems))
    if not out and not skipped:
        raise BadInput(f"{path}:2: expected a row of a run below the header, got none")
    summary = f"{path}: {len(out)} runs ({skipped} rows left out by --layers / --tensor-parallel / --gpu)"
    if schema == "moe":
        summary += f"; moe schema: grouped_gemm unknown read as Megatron-Core's default (off) in {counts.grouped_unknown}"
    if schema == "shared":
        summary += (f"; {schema} schema: recompute unknown read as none in {counts.recompute_unknown} rows, "
                    f"tp_comm_overlap unknown read as on in {counts.overlap_unknown_on} (tp > 1 with sequence "
                    f"parallelism) and off in {counts.overlap_unknown_off}, tp_comm_overlap yes without tp > 1 "
                    f"and sequence parallelism as off in {counts.overlap_yes_off}, sequence_parallel yes at tp 1 "
                    f"as off in {counts.sequence_parallel_tp1}")
    return out, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--schema", choices=("auto", *SCHEMAS), default="auto",
                    help="the CSV's columns (auto: vtrain if it has iteration_time_ms, moe if num_experts, "
                         "else shared)")
    ap.add_argument("--bias", choices=("auto", "yes", "no"), default="auto",
                    help="biases in the blocks (shared schema; auto: with layernorm, none with rmsnorm)")
    ap.add_argument("--layers", type=int, action="append", help="keep only rows of these layer counts")
    ap.add_argument("--tensor-parallel", type=int, action="append",
                    help="keep only rows of these tensor-parallel degrees")
    ap.add_argument("--gpu", action="append",
                    help="keep only rows on these device kinds (the gpu column's names, as A100-80GB; vtrain: "
                         "A100-80GB): calibrate --runs fits one kind's profile")
    ap.add_argument("--tp-comm-overlap-unknown", choices=("on", "off"), default="on",
                    help="shared schema: how tp_comm_overlap 'unknown' is read where tp > 1 with sequence "
                         "parallelism (on: as the NeMo and Megatron-Core performance recipes run; off: "
                         "Megatron's default)")
    a = ap.parse_args()
    try:
        lines, summary = convert(a.csv, a.schema, a.bias, a.layers, a.tensor_parallel, a.tp_comm_overlap_unknown,
                                 a.gpu)
    except BadInput as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # a reader that stopped early (| head)
        sys.stdout = None
        sys.exit(1)
    print(summary, file=sys.stderr)


if __name__ == "__main__":
    main()
