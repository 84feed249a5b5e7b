#!/usr/bin/env python3
"""Kernel table for twinpipe's H100/H200 cost model (issue 39, point 3): what the model assumes, measured.

  gemm         BF16 torch.matmul (cuBLASLt) TFLOP/s at the per-rank GEMM shapes (forward, dgrad, wgrad)
               of the published runs' transformer blocks (BLOCKS below), plus a square sweep;
  fp8          the same shapes through torch._scaled_mm (float8_e4m3fn, per-tensor scales, BF16 out),
               with and without fast accumulation, and the FP8/BF16 ratio;
  attention    SDPA flash attention forward and backward, bf16, causal, head_dim 128, batch 1: PyTorch's
               flash kernel (FlashAttention-2) and, where torch has it, cuDNN's (what Transformer Engine
               runs on Hopper), one row each (`kind`); for the blocks with context parallelism c also the
               kernels of Transformer Engine's load-balanced ring, each GPU's seq / c queries: step 0
               causal over its own seq / c keys, each later step without a mask over half of another's
               (q_seq x kv_seq, `causal`);
  memory       GB/s of copy, add, GELU, layer_norm, rms_norm, softmax on ~2 GB bf16 tensors;
  launch       back-to-back launch gap, per-kernel time in a CUDA graph, host issue time, sync round trip;
  collectives  NCCL all_reduce / all_gather / reduce_scatter busbw (>= 2 GPUs), and a D2D copy between
               two streams of one GPU (twinpipe's local transport);
  chunks       the blocks' tensor-parallel GEMMs as Transformer Engine's userbuffers cut them beside their
               collectives (a ring exchange: t chunks of the tokens; a pipelined reduce-scatter: 4), BF16: the
               whole GEMM, its chunks in series on one stream, and round robin on 3 streams (TE's compute
               streams), where GPT-3's 512-row chunks may lose to wave quantisation what Llama 3.1 70B's
               2,048-row ones do not (traces/published/README.md, issue 36's first recipe);
  moe          the Grok-1 runs' expert GEMMs (shared/published's MoE table: d 6144, expert FFN 32768, top-2)
               in BF16 and FP8 at each row's tokens per expert, and the token permutation of Megatron-Core's
               unfused path: index_select (permute) and index_add_ / scatter_add_ in BF16 and FP32 (unpermute,
               and the permute's backward), where the Grok-1 BF16 steps lack 2-3 ms per MoE block.
Times: CUDA-event medians of >= 10 repeats after warm-up, random data, inputs that fit in L2 rotated
among buffer sets. A failing section records its error and the rest still run; rows past the time
budget are marked skipped.

  PYTHONUNBUFFERED=1 python3 gpu_kernel_table.py --out DIR [--quick]

writes DIR/kernel_table.json and DIR/kernel_table.md and prints the latter (the summary last).
"""
import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
import traceback

START = time.perf_counter()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# Transformer blocks of the published runs: the distinct (model, hidden, heads, kv_heads, ffn, seq,
# mlp, tp, micro_batch, cp) of shared/published/h100-dgx-cloud/runs.csv (86 measured steps from
# NVIDIA's DGX Cloud benchmarking recipes, NVIDIA/dgxc-benchmarking v24.11.1 to v25.05.05; the BF16
# and FP8 runs share these). head_dim = hidden / heads = 128 in all of them. Per-rank GEMM tokens are
# seq*micro_batch (sequence parallelism leaves them unchanged) and, where cp > 1, also seq*micro_batch/cp
# (context parallelism splits the sequence); attention is measured at the full seq.
BLOCKS = [
    ("GPT-3 175B", 12288, 96, 96, 49152, 2048, "gelu", 4, 1, 1),
    ("Llama 3.1 70B", 8192, 64, 8, 28672, 8192, "swiglu", 4, 1, 1),
    ("Llama 3.1 70B", 8192, 64, 8, 28672, 8192, "swiglu", 4, 1, 2),
    ("Llama 3.1 8B", 4096, 32, 8, 14336, 8192, "swiglu", 1, 1, 2),
]
# The Grok-1 proxy runs' experts (traces/published/moe-dgx-cloud: d 6144, expert FFN 32768 gated, top-2
# of 8): (tokens per expert on a GPU, expert tensor parallelism et); tensor parallelism 4 throughout.
# NeMo 1 rows (et = 4): 2,048 / 4,096 / 8,192 tokens per expert (2, 4 or 8 experts per GPU at 4,096
# tokens, and 8,192 at context parallelism 2); NeMo 2 rows (et = 1): 2,048.
MOE = {"d": 6144, "ffn": 32768, "tokens_et": [(2048, 4), (4096, 4), (8192, 4), (2048, 1)],
       "routed_tokens": [2048, 8192]}  # routed copies a GPU permutes (S / t x top-k; S = 4,096 and 16,384)
DEV = "cuda"
BF16 = torch.bfloat16
CFG = {"reps": 20, "target_ms": 2.0, "deadline_s": 150.0, "l2": 50 << 20}
SQUARES = [1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
SIZES_MB = [1, 4, 16, 64, 256, 1024]


def rnd(x):
    return float(f"{x:.5g}") if isinstance(x, float) and math.isfinite(x) else x


def late():
    return time.perf_counter() - START > CFG["deadline_s"]


def log(msg):
    print(f"[{time.perf_counter() - START:6.1f}s] {msg}", flush=True)


def nbuf_for(set_bytes):
    """Buffer sets to rotate among so that the inputs do not stay in L2 between calls."""
    if set_bytes >= 3 * CFG["l2"]:
        return 1
    return min(64, math.ceil(3 * CFG["l2"] / max(set_bytes, 1)))


def timeit(fn, nbuf=1, inner=None):
    """Median seconds of one fn(i) call: warm-up, then reps event-timed batches of `inner` calls
    (by default so that a batch lasts ~target_ms), i cycling over the nbuf buffer sets."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def batch(count, first=0):
        s.record()
        for j in range(count):
            fn((first + j) % nbuf)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3 / count

    batch(3)
    inner = inner or max(1, min(200, math.ceil(CFG["target_ms"] / 1e3 / max(batch(3), 1e-7))))
    return statistics.median(batch(inner, r * inner) for r in range(CFG["reps"]))


def guarded(row, body):
    """row updated with body()'s dict, or with the error (OOM recorded and the cache freed)."""
    if late():
        row["skipped"] = "time budget"
        return row
    try:
        row.update({k: rnd(v) for k, v in body().items()})
    except Exception as e:  # torch.cuda.OutOfMemoryError included
        kind = "OOM" if isinstance(e, torch.cuda.OutOfMemoryError) else type(e).__name__
        row["error"] = f"{kind}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        gc.collect()
        torch.cuda.empty_cache()
    return row


def randn(*shape, grad=False):
    return torch.randn(*shape, device=DEV, dtype=BF16, requires_grad=grad)


# ---------------------------------------------------------------- gemm / fp8
def linears(h, heads, kvh, ffn, mlp, tp):
    """{name: (k_in, k_out)}: a block's four linears on one rank of t."""
    d = h // heads
    return {"qkv": (h, (heads + 2 * kvh) * d // tp), "proj": (h // tp, h),
            "fc1": (h, ffn * (2 if mlp == "swiglu" else 1) // tp), "fc2": (ffn // tp, h)}


def gemm_shapes():
    """{(m, n, k): uses} for the blocks' per-rank GEMMs (tokens = seq*micro_batch, and also
    seq*micro_batch/cp for context-parallel runs), then the square sweep."""
    shapes = {}
    for model, h, heads, kvh, ffn, seq, mlp, tp, mb, cp in BLOCKS:
        for tokens in sorted({seq * mb, seq * mb // cp}, reverse=True):
            for name, (kin, kout) in linears(h, heads, kvh, ffn, mlp, tp).items():
                for pas, mnk in (("fwd", (tokens, kout, kin)), ("dgrad", (tokens, kin, kout)),
                                 ("wgrad", (kin, kout, tokens))):
                    shapes.setdefault(mnk, []).append(f"{model} {name} {pas} t={tokens}")
    for s in SQUARES:
        shapes.setdefault((s, s, s), []).append("square")
    return {mnk: list(dict.fromkeys(uses)) for mnk, uses in shapes.items()}


def sec_gemm(res):
    rows = []
    for (m, n, k), uses in gemm_shapes().items():
        def body():
            nb = nbuf_for(2 * (m * k + k * n))
            a = [randn(m, k) for _ in range(nb)]
            b = [randn(k, n) for _ in range(nb)]
            t = timeit(lambda i: torch.matmul(a[i], b[i]), nb)
            return {"seconds": t, "tflops": 2 * m * n * k / t / 1e12, "buffers": nb}
        row = guarded({"m": m, "n": n, "k": k, "uses": uses}, body)
        log(f"gemm {m}x{n}x{k}: {row.get('tflops', row.get('error', row.get('skipped')))} TFLOP/s")
        rows.append(row)
    return {"what": "torch.matmul(A (m,k), B (k,n)), bf16, both row-major; a kernel shorter than the launch "
                    "gap (launch section) measures the gap", "rows": rows}


def sec_fp8(res):
    if not hasattr(torch, "_scaled_mm"):
        return {"error": "torch._scaled_mm missing"}
    f8 = torch.float8_e4m3fn
    one = torch.tensor(1.0, device=DEV)
    bf = {(r["m"], r["n"], r["k"]): r.get("tflops") for r in res.get("gemm", {}).get("rows", [])}
    rows = []
    for (m, n, k), uses in gemm_shapes().items():
        row = {"m": m, "n": n, "k": k, "uses": uses}
        if m % 16 or n % 16 or k % 16:
            rows.append({**row, "skipped": "dims not multiples of 16"})
            continue

        def body():
            nb = nbuf_for(m * k + k * n)
            a = [randn(m, k).to(f8) for _ in range(nb)]
            bt = [randn(n, k).to(f8) for _ in range(nb)]  # b = bt.t(): column-major (k, n)
            out = {"buffers": nb}
            for key, fast in (("", False), ("fast_", True)):
                try:
                    t = timeit(lambda i: torch._scaled_mm(a[i], bt[i].t(), scale_a=one, scale_b=one,
                                                          out_dtype=BF16, use_fast_accum=fast), nb)
                    out[key + "seconds"] = t
                    out[key + "tflops"] = 2 * m * n * k / t / 1e12
                    if bf.get((m, n, k)):
                        out[key + "ratio_vs_bf16"] = out[key + "tflops"] / bf[(m, n, k)]
                except torch.cuda.OutOfMemoryError:
                    raise
                except Exception as e:
                    out[key + "error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
            return out
        guarded(row, body)
        log(f"fp8 {m}x{n}x{k}: {row.get('tflops', row.get('error', row.get('skipped')))} TFLOP/s, "
            f"fast {row.get('fast_tflops')}, x{row.get('ratio_vs_bf16')} vs bf16")
        rows.append(row)
    return {"what": "torch._scaled_mm(A (m,k) row-major, B (k,n) column-major), float8_e4m3fn x "
                    "float8_e4m3fn -> bf16, per-tensor fp32 scales 1.0; fast_ = use_fast_accum=True", "rows": rows}


# ---------------------------------------------------------------- chunks
def chunk_gemms():
    """[(block, gemm, m, n, k, chunks)]: each tensor-parallel block's GEMMs that userbuffers overlap, with
    the chunks Transformer Engine cuts the tokens into (per-rank tokens seq * micro_batch / cp)."""
    out = []
    for model, h, heads, kvh, ffn, seq, mlp, tp, mb, cp in BLOCKS:
        if tp == 1:
            continue
        tokens, block, lin = seq * mb // cp, f"{model} cp={cp}", linears(h, heads, kvh, ffn, mlp, tp)
        # A column-parallel forward (and a row-parallel input gradient) reads gathered tokens: a ring of
        # t chunks; a row-parallel forward feeds a reduce-scatter pipelined in 4.
        out += [(block, "qkv fwd, ring exchange", tokens, lin["qkv"][1], lin["qkv"][0], tp),
                (block, "fc1 fwd, ring exchange", tokens, lin["fc1"][1], lin["fc1"][0], tp),
                (block, "proj dgrad, ring exchange", tokens, *lin["proj"], tp),
                (block, "fc2 dgrad, ring exchange", tokens, *lin["fc2"], tp),
                (block, "proj fwd, pipelined reduce-scatter", tokens, lin["proj"][1], lin["proj"][0], 4),
                (block, "fc2 fwd, pipelined reduce-scatter", tokens, lin["fc2"][1], lin["fc2"][0], 4)]
    return out


def sec_chunks(res):
    streams = [torch.cuda.Stream() for _ in range(3)]
    rows = []
    for block, gemm, m, n, k, chunks in chunk_gemms():
        def body():
            nb = nbuf_for(2 * (m * k + k * n))
            a = [randn(m, k) for _ in range(nb)]
            b = [randn(k, n) for _ in range(nb)]
            parts = [x.chunk(chunks, 0) for x in a]  # row blocks of A: contiguous views

            def streamed(i):
                main = torch.cuda.current_stream()
                for st in streams:
                    st.wait_stream(main)
                for j, p in enumerate(parts[i]):
                    with torch.cuda.stream(streams[j % len(streams)]):
                        torch.matmul(p, b[i])
                for st in streams:
                    main.wait_stream(st)

            whole = timeit(lambda i: torch.matmul(a[i], b[i]), nb)
            series = timeit(lambda i: [torch.matmul(p, b[i]) for p in parts[i]], nb)
            side = timeit(streamed, nb)
            return {"whole_seconds": whole, "series_seconds": series, "streams_seconds": side,
                    "series_vs_whole": series / whole, "streams_vs_whole": side / whole,
                    "whole_tflops": 2 * m * n * k / whole / 1e12}
        row = guarded({"block": block, "gemm": gemm, "m": m, "n": n, "k": k, "chunks": chunks}, body)
        log(f"chunks {block} {gemm} {m}x{n}x{k} / {chunks}: series x{row.get('series_vs_whole')}, "
            f"3 streams x{row.get('streams_vs_whole', row.get('error', row.get('skipped')))}")
        rows.append(row)
    return {"what": "torch.matmul of the whole (m,k) x (k,n), bf16, against its m split into `chunks` row blocks: "
                    "in series on one stream, and round robin on 3 side streams joined after; no collective runs "
                    "beside them (what the chunks alone cost)", "rows": rows}


# ---------------------------------------------------------------- moe
def moe_gemm_shapes():
    """{(m, n, k): uses}: the experts' fc1 (gated: 2 x ffn / et wide) and fc2, forward, dgrad, wgrad."""
    shapes, d, ffn = {}, MOE["d"], MOE["ffn"]
    for m, et in MOE["tokens_et"]:
        for name, kin, kout in (("fc1", d, 2 * ffn // et), ("fc2", ffn // et, d)):
            for pas, mnk in (("fwd", (m, kout, kin)), ("dgrad", (m, kin, kout)), ("wgrad", (kin, kout, m))):
                shapes.setdefault(mnk, []).append(f"Grok-1 expert {name} {pas} tokens={m} et={et}")
    return shapes


def sec_moe(res):
    f8, one = torch.float8_e4m3fn, torch.tensor(1.0, device=DEV)
    gemms = []
    for (m, n, k), uses in moe_gemm_shapes().items():
        def body():
            nb = nbuf_for(2 * (m * k + k * n))
            a, b = [randn(m, k) for _ in range(nb)], [randn(k, n) for _ in range(nb)]
            t = timeit(lambda i: torch.matmul(a[i], b[i]), nb)
            out = {"seconds": t, "tflops": 2 * m * n * k / t / 1e12, "buffers": nb}
            if hasattr(torch, "_scaled_mm"):
                a8, bt8 = [x.to(f8) for x in a], [x.t().contiguous().to(f8) for x in b]
                t8 = timeit(lambda i: torch._scaled_mm(a8[i], bt8[i].t(), scale_a=one, scale_b=one,
                                                       out_dtype=BF16), nb)
                out.update(fp8_seconds=t8, fp8_tflops=2 * m * n * k / t8 / 1e12, fp8_ratio_vs_bf16=t / t8)
            return out
        row = guarded({"m": m, "n": n, "k": k, "uses": uses}, body)
        log(f"moe gemm {m}x{n}x{k}: {row.get('tflops', row.get('error', row.get('skipped')))} TFLOP/s, "
            f"fp8 {row.get('fp8_tflops')}")
        gemms.append(row)
    perm = []
    d = MOE["d"]
    for routed in MOE["routed_tokens"]:
        tokens = routed // 2  # top-2: each token routed twice
        idx = torch.randperm(routed, device=DEV) % tokens  # the token each routed copy comes from
        for dtype, tag in ((BF16, "bf16"), (torch.float32, "fp32")):
            x = torch.randn(tokens, d, device=DEV, dtype=dtype)
            y = torch.randn(routed, d, device=DEV, dtype=dtype)
            dst = torch.zeros(tokens, d, device=DEV, dtype=dtype)
            index2d = idx.unsqueeze(1).expand(routed, d)
            e = x.element_size()
            ops = [("permute index_select", lambda i: x.index_select(0, idx), (tokens + routed) * d * e),
                   ("unpermute index_add_", lambda i: dst.index_add_(0, idx, y), (2 * tokens + routed) * d * e),
                   ("unpermute scatter_add_", lambda i: dst.scatter_add_(0, index2d, y),
                    (2 * tokens + routed) * d * e)]
            for name, fn, nbytes in ops:
                def body():
                    t = timeit(fn)
                    return {"seconds": t, "GBps": nbytes / t / 1e9}
                row = guarded({"op": f"{name} {tag}", "routed": routed, "d": d, "bytes": nbytes}, body)
                log(f"moe {name} {tag} routed={routed}: {row.get('seconds', row.get('error'))} s, "
                    f"{row.get('GBps')} GB/s")
                perm.append(row)
    return {"what": "Grok-1 expert GEMMs (torch.matmul bf16; torch._scaled_mm e4m3 -> bf16) and the "
                    "unfused token permutation (random routing of 2 copies a token)", "rows": gemms,
            "permutation": perm}


# ---------------------------------------------------------------- attention
def sec_attention(res):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    shapes = {}  # (heads, kv heads, query tokens, key tokens, causal): what uses it
    for model, h, heads, kvh, ffn, seq, mlp, tp, mb, cp in BLOCKS:
        shapes.setdefault((heads // tp, kvh // tp, seq, seq, True), set()).add(model)
        if cp > 1:
            local = seq // cp
            shapes.setdefault((heads // tp, kvh // tp, local, local, True), set()).add(f"{model} cp{cp} step 0")
            shapes.setdefault((heads // tp, kvh // tp, local, local // 2, False), set()).add(
                f"{model} cp{cp} later steps")
    for seq in (2048, 4096, 8192):
        shapes.setdefault((32, 32, seq, seq, True), set()).add("sweep")
    sdpa, d, b = F.scaled_dot_product_attention, 128, 1
    # PyTorch's flash kernel (FlashAttention-2; its memory-efficient one where flash refuses), and
    # cuDNN's fused attention, which Transformer Engine picks on Hopper (dot_product_attention/
    # utils.py: "give FusedAttention preference on Hopper+") and so the published runs ran.
    kinds = [("flash", [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        kinds.append(("cudnn", [SDPBackend.CUDNN_ATTENTION]))
    rows = []
    for (h, hkv, s, skv, causal), uses in shapes.items():
        for kind, backends in kinds:
            def body():
                nb = nbuf_for(2 * b * d * (2 * h * s + 2 * hkv * skv))
                q = [randn(b, h, s, d, grad=True) for _ in range(nb)]
                kv = [(randn(b, hkv, skv, d), randn(b, hkv, skv, d)) for _ in range(nb)]
                go = randn(b, h, s, d)
                notes = []  # backend first, then GQA natively (enable_gqa) or kv heads repeat_interleave'd
                for backend, gqa in [(bk, g) for bk in backends
                                     for g in (("none",) if h == hkv else ("native", "repeat_interleave"))]:
                    if gqa == "repeat_interleave":
                        kk = [tuple(x.repeat_interleave(h // hkv, dim=1).requires_grad_() for x in p) for p in kv]
                    else:
                        kk = [tuple(x.detach().requires_grad_() for x in p) for p in kv]
                    kw = {"is_causal": causal, **({"enable_gqa": True} if gqa == "native" else {})}
                    try:
                        with sdpa_kernel([backend]):
                            torch.autograd.grad(sdpa(q[0], *kk[0], **kw), (q[0], *kk[0]), go)
                        torch.cuda.synchronize()
                        break
                    except torch.cuda.OutOfMemoryError:
                        raise
                    except Exception as e:
                        notes.append(f"{backend.name}/{gqa}: {type(e).__name__}: {str(e).strip()[:160]}")
                else:
                    raise RuntimeError("no SDPA backend ran: " + " | ".join(notes))
                with sdpa_kernel([backend]):
                    tf = timeit(lambda i: sdpa(q[i], *kk[i], **kw), nb)
                    tfb = timeit(lambda i: torch.autograd.grad(sdpa(q[i], *kk[i], **kw), (q[i], *kk[i]), go), nb)
                flops = 2 * 2 * b * h * s * skv * d / (2 if causal else 1)
                tb = tfb - tf
                return {"backend": backend.name, "gqa": gqa, "notes": notes, "fwd_seconds": tf,
                        "fwd_tflops": flops / tf / 1e12, "bwd_seconds": tb,
                        "bwd_tflops": 2.5 * flops / tb / 1e12 if tb > 0 else None, "buffers": nb}
            row = guarded({"heads": h, "kv_heads": hkv, "seq": s, "kv_seq": skv, "causal": causal, "head_dim": d,
                           "batch": b, "kind": kind, "uses": sorted(uses)}, body)
            log(f"attention {kind} h={h} kv={hkv} s={s}x{skv}{' causal' if causal else ''}: fwd {row.get('fwd_tflops', row.get('error'))} "
                f"bwd {row.get('bwd_tflops')} TFLOP/s ({row.get('backend')}, gqa {row.get('gqa')})")
            rows.append(row)
    return {"flops": "fwd 2*2*b*h*seq*kv_seq*d (halved when causal), bwd 2.5x fwd; bwd time = (fwd+bwd) - fwd; "
                     "repeat_interleave'd kv: expansion and its gradient reduction not timed", "rows": rows}


# ---------------------------------------------------------------- memory
def sec_memory(res):
    cols = 8192
    tokens = (1 << 30) // cols  # 2^30 bf16 elements = 2 GiB per tensor
    x, y, dst = randn(tokens, cols), randn(tokens, cols), torch.empty(tokens, cols, device=DEV, dtype=BF16)
    w, bias = randn(cols), randn(cols)
    ops = [("copy (d2d)", lambda i: dst.copy_(x), 2), ("add", lambda i: torch.add(x, y), 3),
           ("gelu", lambda i: F.gelu(x), 2), ("layer_norm", lambda i: F.layer_norm(x, (cols,), w, bias), 2),
           ("rms_norm", lambda i: F.rms_norm(x, (cols,), w), 2),  # AttributeError recorded if torch lacks it
           ("softmax", lambda i: torch.softmax(x, -1), 2)]
    rows = []
    for name, fn, tensors in ops:
        nbytes = tensors * x.numel() * x.element_size()

        def body():
            t = timeit(fn)
            return {"seconds": t, "GBps": nbytes / t / 1e9}
        row = guarded({"op": name, "shape": [tokens, cols], "dtype": "bf16", "bytes": nbytes}, body)
        log(f"memory {name}: {row.get('GBps', row.get('error'))} GB/s")
        rows.append(row)
    return {"rows": rows}


# ---------------------------------------------------------------- launch
def sec_launch(res):
    n, x = 10000, torch.zeros(1, device=DEV)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu, host = [], []
    for _ in range(11):  # the first is warm-up
        torch.cuda.synchronize()
        s.record()
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        host.append((time.perf_counter() - t0) / n)
        e.record()
        e.synchronize()
        gpu.append(s.elapsed_time(e) / 1e3 / n)
    out = {"launches": n, "back_to_back_s": statistics.median(gpu[1:]), "host_issue_s": statistics.median(host[1:])}
    try:
        g, gn = torch.cuda.CUDAGraph(), 1000
        with torch.cuda.graph(g):
            for _ in range(gn):
                x.add_(1)
        out["graph_nodes"], out["graph_per_kernel_s"] = gn, timeit(lambda i: g.replay()) / gn
    except Exception as ex:
        out["graph_error"] = f"{type(ex).__name__}: {ex}"
    for key, fn in (("sync_idle_s", lambda: None), ("launch_plus_sync_s", lambda: x.add_(1))):
        times = []
        for _ in range(1000):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        out[key] = statistics.median(times)
    out = {k: rnd(v) for k, v in out.items()}
    log(f"launch: {out}")
    return out


# ---------------------------------------------------------------- collectives
def _coll_worker(rank, world, init_file, sizes_mb, reps, out_path):
    import torch.distributed as dist
    CFG["reps"] = reps
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="file://" + init_file, rank=rank, world_size=world)
    rows = []
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for mb in sizes_mb:
            n = (mb << 20) // 2 // world * world  # S: all_reduce buffer, all_gather output, reduce_scatter input
            big, small = randn(n), randn(n // world)
            fn = {"all_reduce": lambda: dist.all_reduce(big),
                  "all_gather": lambda: dist.all_gather_into_tensor(big, small),
                  "reduce_scatter": lambda: dist.reduce_scatter_tensor(small, big)}[op]
            torch.cuda.synchronize()
            dist.barrier()
            t = timeit(lambda i: fn(), inner=5)  # the same number of calls on every rank
            algbw = 2 * n / t / 1e9
            factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
            rows.append({"op": op, "gpus": world, "bytes": 2 * n, "seconds": rnd(t), "algbw_GBps": rnd(algbw),
                         "busbw_GBps": rnd(algbw * factor)})
            big = small = None
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def sec_collectives(res):
    out = {}
    ngpu = torch.cuda.device_count()
    if ngpu < 2:
        out["nccl"] = {"skipped": "one GPU: NCCL refuses two ranks on one device"}
    elif CFG["deadline_s"] - (time.perf_counter() - START) < 45:
        out["nccl"] = {"skipped": "time budget"}
    else:
        import torch.multiprocessing as mp
        rows, worlds = [], sorted({2, ngpu} | {w for w in (4, 8) if w <= ngpu})
        for world in worlds:
            if late():
                rows.append({"gpus": world, "skipped": "time budget"})
                continue
            tmp = tempfile.mkdtemp()
            try:
                path = os.path.join(tmp, "rows.json")
                ctx = mp.spawn(_coll_worker, args=(world, os.path.join(tmp, "init"), SIZES_MB, 10, path),
                               nprocs=world, join=False)
                limit = START + CFG["deadline_s"] + 10
                while not ctx.join(timeout=5):  # raises if a rank failed
                    if time.perf_counter() > limit:
                        for p in ctx.processes:
                            p.terminate()
                        raise TimeoutError(f"{world} ranks still running at the time budget, terminated")
                rows += json.load(open(path))
                log(f"nccl {world} GPUs: {[r['busbw_GBps'] for r in rows if r.get('gpus') == world]}")
            except Exception as e:
                rows.append({"gpus": world, "error": f"{type(e).__name__}: {str(e).strip()[:300]}"})
        out["nccl"] = {"busbw": "nccl-tests: all_reduce algbw*2(n-1)/n, all_gather/reduce_scatter algbw*(n-1)/n, "
                                "S = the full buffer; rank 0's median", "rows": rows}
    send, recv = torch.cuda.Stream(), torch.cuda.Stream()
    rows = []
    for mb in SIZES_MB:
        size = mb << 20

        def body():
            nb = nbuf_for(2 * size)
            src = [randn(size // 2) for _ in range(nb)]
            dst = [torch.empty(size // 2, device=DEV, dtype=BF16) for _ in range(nb)]
            ready = torch.cuda.Event()
            torch.cuda.synchronize()

            def fn(i):  # the sender's stream marks the tensor ready; the receiver's stream waits and copies
                ready.record(send)
                recv.wait_event(ready)
                dst[i].copy_(src[i])
            with torch.cuda.stream(recv):
                t = timeit(fn, nb)
            return {"seconds": t, "GBps": size / t / 1e9, "read_write_GBps": 2 * size / t / 1e9}
        row = guarded({"bytes": size}, body)
        log(f"stream copy {mb} MB: {row.get('GBps', row.get('error'))} GB/s")
        rows.append(row)
    out["stream_copy"] = {"what": "cudaMemcpyAsync D2D on a receiver stream after waiting on the sender "
                                  "stream's event; GBps = payload bytes / time", "rows": rows}
    return out


# ---------------------------------------------------------------- environment, output
def smi(query):
    try:
        p = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True,
                           text=True, timeout=20)
        return p.stdout.strip() or p.stderr.strip()
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def environment():
    p = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "device": p.name, "capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
            "l2_bytes": getattr(p, "L2_cache_size", None), "memory_bytes": p.total_memory,
            "device_count": torch.cuda.device_count(),
            "bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "blas": str(getattr(torch.backends.cuda, "preferred_blas_library", lambda: None)()),
            "cublas": "not exposed by torch",
            "driver": smi("driver_version"), "clocks_before": smi("clocks.sm,clocks.max.sm,clocks.mem,power.draw")}


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "; ".join(map(str, v[:3])) + (f" (+{len(v) - 3})" if len(v) > 3 else "")
    return "" if v is None else str(v).replace("|", "/").replace("\n", " ")


def md_table(rows, cols):
    cols = [c for c in cols if any(c in r for r in rows)] or cols
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def best(rows, key):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return fmt(max(vals)) if vals else "-"


def markdown(res):
    """Tables per section, then the short summary (printed last)."""
    env, la, co = res.get("env", {}), res.get("launch", {}), res.get("collectives", {})
    rows = {k: res.get(k, {}).get("rows", []) for k in ("gemm", "fp8", "attention", "memory")}
    md = [f"# Kernel table\n\n{env.get('device')} ({env.get('sm_count')} SMs, L2 {env.get('l2_bytes')} B), "
          f"torch {env.get('torch')}, CUDA {env.get('cuda')}, {res.get('mode')} mode, {res.get('wall_s')} s\n"]
    cols = {"gemm": ["m", "n", "k", "seconds", "tflops", "uses", "error", "skipped"],
            "fp8": ["m", "n", "k", "tflops", "fast_tflops", "ratio_vs_bf16", "fast_ratio_vs_bf16", "error", "skipped"],
            "attention": ["heads", "kv_heads", "seq", "kv_seq", "causal", "kind", "backend", "gqa", "fwd_seconds",
                          "fwd_tflops", "bwd_seconds", "bwd_tflops", "error", "skipped"],
            "memory": ["op", "shape", "seconds", "GBps", "error", "skipped"]}
    for name in cols:
        md.append(f"\n## {name}\n\n" + md_table(rows[name], cols[name]))
    md.append("\n## launch\n\n" + md_table([{"what": k, "value": v} for k, v in la.items() if k != "section_s"],
                                            ["what", "value"]))
    nccl = co.get("nccl", {})
    md.append("\n## collectives\n\n" + (md_table(nccl["rows"], ["op", "gpus", "bytes", "seconds", "algbw_GBps",
                                                              "busbw_GBps", "error", "skipped"])
                                         if "rows" in nccl else f"NCCL: {nccl.get('skipped', co.get('error'))}\n"))
    md.append("\nTwo streams of one GPU:\n\n" + md_table(co.get("stream_copy", {}).get("rows", []), [
        "bytes", "seconds", "GBps", "read_write_GBps", "error", "skipped"]))
    md.append("\n## chunks\n\n" + md_table(res.get("chunks", {}).get("rows", []), [
        "block", "gemm", "m", "n", "k", "chunks", "whole_tflops", "series_vs_whole", "streams_vs_whole", "error",
        "skipped"]))
    moe = res.get("moe", {})
    md.append("\n## moe\n\n" + md_table(moe.get("rows", []), ["m", "n", "k", "tflops", "fp8_tflops",
                                                              "fp8_ratio_vs_bf16", "uses", "error", "skipped"]))
    md.append("\nToken permutation:\n\n" + md_table(moe.get("permutation", []), ["op", "routed", "d", "seconds",
                                                                                "GBps", "error", "skipped"]))
    blk = [r["tflops"] for r in rows["gemm"] if "tflops" in r and r["uses"] != ["square"]]
    g, f8, at, mem = rows["gemm"], rows["fp8"], rows["attention"], rows["memory"]
    md += ["\n## Summary\n\n",
           f"- BF16 GEMM peak {best(g, 'tflops')} TFLOP/s; block shapes median "
           f"{fmt(statistics.median(blk)) if blk else '-'} TFLOP/s over {len(blk)} shapes\n",
           f"- FP8 GEMM peak {best(f8, 'tflops')} TFLOP/s (fast accumulation {best(f8, 'fast_tflops')})\n",
           *[f"- attention ({kind}) best fwd {best(sel, 'fwd_tflops')}, bwd {best(sel, 'bwd_tflops')} TFLOP/s\n"
             for kind in ("flash", "cudnn") for sel in [[r for r in at if r.get("kind", "flash") == kind]] if sel],
           f"- memory-bound best {best(mem, 'GBps')} GB/s; launch gap {fmt(la.get('back_to_back_s')) or '-'} s, "
           f"in a CUDA graph {fmt(la.get('graph_per_kernel_s')) or '-'} s per kernel\n"]
    md += [f"- {k} error: {v['error']}\n" for k, v in res.items() if isinstance(v, dict) and "error" in v]
    return "".join(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for kernel_table.json and kernel_table.md")
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sweep sizes (~60 s)")
    args = ap.parse_args()
    global SQUARES, SIZES_MB
    if args.quick:
        CFG.update(reps=10, target_ms=1.0, deadline_s=50.0)
        SQUARES, SIZES_MB = [2048, 4096, 8192, 16384], [1, 16, 256, 1024]
    os.makedirs(args.out, exist_ok=True)
    res = {"mode": "quick" if args.quick else "full", "reps": CFG["reps"]}
    try:
        res["env"] = environment()
    except Exception as e:
        res["env"] = {"error": f"{type(e).__name__}: {e}"}
    CFG["l2"] = res["env"].get("l2_bytes") or CFG["l2"]
    log(f"env: {res['env'].get('device')}, torch {torch.__version__}, L2 {CFG['l2']} B")
    for name, fn in (("gemm", sec_gemm), ("fp8", sec_fp8), ("chunks", sec_chunks), ("moe", sec_moe), ("attention", sec_attention),
                     ("memory", sec_memory), ("launch", sec_launch), ("collectives", sec_collectives)):
        t0 = time.perf_counter()
        log(f"== {name}")
        torch.manual_seed(0)
        try:
            res[name] = fn(res)
        except Exception as e:
            traceback.print_exc()
            res[name] = {"error": f"{type(e).__name__}: {str(e).strip()[:500]}"}
        res[name]["section_s"] = rnd(time.perf_counter() - t0)
        gc.collect()
        torch.cuda.empty_cache()
    res["env"]["clocks_after"] = smi("clocks.sm,clocks.max.sm,clocks.mem,power.draw")
    res["wall_s"] = rnd(time.perf_counter() - START)
    with open(os.path.join(args.out, "kernel_table.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = markdown(res)
    with open(os.path.join(args.out, "kernel_table.md"), "w") as f:
        f.write(md)
    print(md, flush=True)


if __name__ == "__main__":
    main()
