#include "cost_models/generators.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <fmt/format.h>

namespace twinpipe::cost {

namespace {

// Kernel builders: a GEMM per sample whose `scaled` dimension the
// micro-batch multiplies, and a memory-bound kernel of `bytes` per sample.
Kernel Gemm(std::string name, Kernel::Pass pass, double m, double n, double k, double batch = 1,
            Kernel::Scaled scaled = Kernel::Scaled::kM) {
  return Kernel{.pass = pass, .gemm = true, .m = m, .n = n, .k = k, .batch = batch, .scaled = scaled,
                .name = std::move(name)};
}
Kernel Memory(std::string name, Kernel::Pass pass, double bytes) {
  return Kernel{.pass = pass, .gemm = false, .bytes = bytes, .name = std::move(name)};
}

// A cast or transpose Transformer Engine's linear issues from its own C++
// (one call, no eager framework ops around it): Kernel::framework_ops 1.
Kernel Fp8Copy(std::string name, Kernel::Pass pass, double bytes) {
  Kernel k = Memory(std::move(name), pass, bytes);
  k.framework_ops = 1;
  return k;
}

// `launches` small eager kernels moving `bytes` in all. Counted call by call
// in the framework's source, each launch is one framework op (where a
// modelled kernel of a module stands for kOpsPerKernel: its reshapes, casts
// and allocation).
Kernel CallByCall(std::string name, Kernel::Pass pass, double launches, double bytes) {
  Kernel k = Memory(std::move(name), pass, bytes);
  k.launches = launches;
  k.framework_ops = 1;
  return k;
}

// `launches` call-by-call kernels of one kind, each reading and writing at
// most `elements` elements of 4 bytes per sample.
Kernel Tiny(std::string name, Kernel::Pass pass, double launches, double elements) {
  return CallByCall(std::move(name), pass, launches, 8 * elements * launches);
}

// Megatron-Core's permutation of the routed copies as its all-to-all
// dispatcher runs it (moe_utils.py's permute and unpermute, core_v0.10.0 to
// core_v0.12.0; core_v0.9.0's padded combine scatter-adds out of place, a
// copy of X more), for X bytes of this GPU's tokens, P of their routed copies
// and `weights` combine weights (bf16, as the router's logits): the permute
// is one index_select (read X, write P; its gradient a zeroed X and an
// index_add of P into it: write X, read P, read and write X); the combine
// multiplies the copies by their weights (read P, write P), zeroes X and
// scatter-adds the copies into it (read P, read and write X); its gradient
// gathers the output's gradient into the copies (read X, write P),
// multiplies it by the weights (read P, write P) and by the copies for the
// weights' gradient (read 2 P, write P), summed over each copy (read P).
struct PermutationBytes {
  double launches, bytes;
};
PermutationBytes PermuteGradientBytes(double X, double P) { return {2, 3 * X + P}; }
PermutationBytes CombineBytes(double X, double P, double weights) { return {3, 3 * X + 3 * P + 2 * weights}; }
PermutationBytes CombineGradientBytes(double X, double P, double weights) { return {4, X + 7 * P + 4 * weights}; }
Kernel Permutation(std::string name, Kernel::Pass pass, const PermutationBytes& p) {
  return CallByCall(std::move(name), pass, p.launches, p.bytes);
}

// The small kernels Megatron-Core's top-k router launches beside its top-k
// kernel and its gradient (router.topk, router.topk.bwd), counted in
// core_v0.12.0's moe_utils.py and router.py (core_v0.9.0's padded path
// differs by a few; an out-of-place scatter is a copy and a scatter).
// Forward: the softmax over the k scores and its cast back (2); the routing
// masks, zeros_like + copy + scatter of the gates and zeros_like + int +
// copy + scatter + bool of the map, and the tokens per expert (9); with a
// capacity, the top-k over the tokens, zeros_like + copy + scatter + bool of
// its mask and the gates times it (6); the auxiliary loss, a softmax over
// the E logits in fp32, the sum over the tokens, times the counts, the sum
// and the coefficient (5), and its logging tracker's divide and add (2).
// Backward: the loss scaler's ones_like and scale (2), the auxiliary loss's chain back
// to the logits (4), the gates' (the scatter's gather, the cast's, the
// softmax's and the zeros the top-k scatters into: 4; with a capacity, the
// mask's product: 1) and the two gradients of the logits summed (1).
struct RouterKernels {
  double forward, backward;
};
RouterKernels RouterLaunches(const TransformerSpec& spec) {
  const bool capacity = spec.capacity_factor > 0;
  return {.forward = 18.0 + (capacity ? 6 : 0), .backward = 11.0 + (capacity ? 1 : 0)};
}

// Where Transformer Engine casts an FP8 linear's operands to FP8 (AddLinear).
// By default the linear casts its input with a transposed copy for the
// weight gradient in the forward, and its output gradient likewise in the
// backward: 4 bytes an element (read 2, write 1 + 1). Two cases differ:
// - `input_from_norm`: a LayerNormLinear (Megatron-Core's fused norm and
//   QKV or FC1 projection): the norm kernel writes the FP8 input itself
//   (its bytes are the norm's). Gathered in FP8 over `input_group` > 1 GPUs
//   (sequence parallelism), the gathered copy is transposed for the weight
//   gradient (read 1, write 1); otherwise the norm writes the transpose too.
// - `grad_group` > 1: a row-parallel linear under sequence parallelism: its
//   output gradient's shard (S / t tokens) is cast (read 2, write 1),
//   gathered in FP8 and the gathered copy transposed for the weight
//   gradient (TE's grad_output_preprocess, v1.11 to v2.x).
struct Fp8Operands {
  bool input_from_norm = false;
  double input_group = 1;
  double grad_group = 1;
};

// The four weight GEMMs of a block (S tokens x in -> out) contribute a
// forward, an input-gradient (S x out by out x in) and a weight-gradient
// (in x S by S x out) GEMM each. In FP8 (Transformer Engine), each GEMM
// takes FP8 operands, cast as `ops` says.
void AddLinear(std::vector<Kernel>& k, const std::string& name, double S, double in, double out, bool fp8 = false,
               const Fp8Operands& ops = {}) {
  if (fp8 && !ops.input_from_norm) k.push_back(Fp8Copy(name + ".cast", Kernel::Pass::kForward, 4 * S * in));
  k.push_back(Gemm(name, Kernel::Pass::kForward, S, out, in));
  k.back().fp8 = fp8;
  if (fp8) {
    const double cast = ops.grad_group > 1 ? 3 * S / ops.grad_group * out : 4 * S * out;
    k.push_back(Fp8Copy(name + ".dgrad.cast", Kernel::Pass::kInput, cast));
  }
  k.push_back(Gemm(name + ".dgrad", Kernel::Pass::kInput, S, in, out));
  k.back().fp8 = fp8;
  if (fp8 && ops.input_from_norm && ops.input_group > 1) {
    k.push_back(Fp8Copy(name + ".transpose", Kernel::Pass::kWeight, 2 * S * in));
  }
  if (fp8 && ops.grad_group > 1) k.push_back(Fp8Copy(name + ".dgrad.transpose", Kernel::Pass::kWeight, 2 * S * out));
  k.push_back(Gemm(name + ".wgrad", Kernel::Pass::kWeight, in, out, S, 1, Kernel::Scaled::kK));
  k.back().fp8 = fp8;
}

// The experts' linear (MoE): `experts` GEMMs of m tokens each (m = the
// tokens routed to one expert per sample), in -> out, as one grouped kernel
// or as a kernel per expert; FP8 as AddLinear. `same_kernel`: more groups
// of the grouped kernel just added (no launch of their own).
void AddExpertLinear(std::vector<Kernel>& k, const std::string& name, double m, double in, double out, double experts,
                     bool grouped, bool fp8, bool same_kernel = false) {
  const double launches = grouped ? (same_kernel ? 0 : 1) : experts;
  const size_t first = k.size();
  if (fp8) k.push_back(Fp8Copy(name + ".cast", Kernel::Pass::kForward, 4 * m * experts * in));
  k.push_back(Gemm(name, Kernel::Pass::kForward, m, out, in, experts));
  if (fp8) k.push_back(Fp8Copy(name + ".dgrad.cast", Kernel::Pass::kInput, 4 * m * experts * out));
  k.push_back(Gemm(name + ".dgrad", Kernel::Pass::kInput, m, in, out, experts));
  k.push_back(Gemm(name + ".wgrad", Kernel::Pass::kWeight, in, out, m, experts, Kernel::Scaled::kK));
  for (size_t i = first; i < k.size(); ++i) {
    if (k[i].gemm) {
      k[i].fp8 = fp8;
      k[i].launches = launches;
    }
  }
}

// The kernels with each weight-gradient GEMM adding into the gradient kept
// across the micro-batches in the spec's gradient precision.
std::vector<Kernel> KeepingGradients(std::vector<Kernel> k, const TransformerSpec& spec) {
  const double kept = DtypeBytes(spec.GradientDtype());
  for (Kernel& kn : k) {
    if (kn.gemm && kn.pass == Kernel::Pass::kWeight) kn.accumulate_bytes = kept;
  }
  return k;
}

// Makes the collective `collective` of k run beside the kernel `target`
// (Kernel::overlaps), `exposed` of it showing; nothing when either is absent.
void Beside(std::vector<Kernel>& k, const std::string& collective, const std::string& target, double exposed) {
  auto find = [&](const std::string& name) {
    return std::find_if(k.begin(), k.end(), [&](const Kernel& kn) { return kn.name == name; });
  };
  const auto c = find(collective), g = find(target);
  if (c == k.end() || g == k.end()) return;
  c->overlaps = static_cast<int32_t>(g - k.begin());
  c->exposed = exposed;
}

Kernel Collective(std::string name, Kernel::Pass pass, Kernel::Collective kind, double bytes, double group) {
  return Kernel{.pass = pass, .gemm = false, .collective = kind, .group = group, .bytes = bytes, .name = std::move(name)};
}

// Tensor parallelism of one layer: t GPUs, sequence parallel or not. `Reduce`
// adds what follows a row-parallel GEMM (an all-reduce, or with sequence
// parallelism a reduce-scatter), `Gather` what precedes a column-parallel one
// (nothing, or an all-gather); `norm` divides what sequence parallelism shards.
struct TensorParallel {
  double t = 1;
  bool sp = false;
  double norm() const { return sp ? t : 1; }
  void Reduce(std::vector<Kernel>& k, const std::string& name, Kernel::Pass pass, double bytes) const {
    if (t > 1) {
      k.push_back(Collective(name, pass, sp ? Kernel::Collective::kReduceScatter : Kernel::Collective::kAllReduce,
                             bytes, t));
    }
  }
  void Gather(std::vector<Kernel>& k, const std::string& name, Kernel::Pass pass, double bytes) const {
    if (t > 1 && sp) k.push_back(Collective(name, pass, Kernel::Collective::kAllGather, bytes, t));
  }
};

// The attention softmax as Megatron-LM runs it (FusedScaleMaskSoftmax):
// its fused CUDA kernel (read the scores, write the probabilities) takes
// half-precision scores with 16 < S <= 4096 and S a multiple of 4, and b x
// (heads on this GPU) a multiple of 4 and of the kernel's batches per
// thread block (8 rows when S <= 128, else 4; causal masks; a padding mask
// needs S a multiple of it instead). Otherwise PyTorch's softmax runs:
// half inputs are cast to fp32 first and back after (query-key layer
// scaling, Megatron's default, keeps the softmax in fp32), with the scale
// and the mask as kernels of their own; its backward is autograd's chain of
// the same. Per score element, bytes read and written: fused forward 2e,
// backward 3e; PyTorch's, the casts e + 4 each, scale and mask 8 each,
// softmax 8 (its backward 12).
void AddSoftmax(std::vector<Kernel>& k, const std::string& name, Kernel::Pass fwd_pass, Kernel::Pass bwd_pass,
                double A, double e, double S, double heads, bool causal, bool backward) {
  const bool half = e == 2;
  const double per_block = S <= 128 ? 8 : 4;
  const bool shape_fits =
      half && S > 16 && S <= 4096 && std::fmod(S, 4) == 0 && (causal || std::fmod(S, per_block) == 0);
  const double quantum = causal ? per_block : 4;
  auto variant = [&](Kernel kn, Kernel::Variant v) {
    kn.variant = shape_fits ? v : Kernel::Variant::kAlways;
    kn.batch = heads;
    kn.quantum = quantum;
    return kn;
  };
  if (shape_fits) {
    k.push_back(variant(Memory(name, fwd_pass, 2 * A * e), Kernel::Variant::kFused));
    if (backward) k.push_back(variant(Memory(name + ".bwd", bwd_pass, 3 * A * e), Kernel::Variant::kFused));
  }
  const auto U = Kernel::Variant::kUnfused;
  if (half) k.push_back(variant(Memory(name + ".to_fp32", fwd_pass, A * (e + 4)), U));
  k.push_back(variant(Memory(name + ".scale", fwd_pass, 8 * A), U));
  k.push_back(variant(Memory(name + ".mask", fwd_pass, 8 * A), U));
  k.push_back(variant(Memory(name + ".torch", fwd_pass, 8 * A), U));
  if (half) k.push_back(variant(Memory(name + ".to_half", fwd_pass, A * (4 + e)), U));
  if (!backward) return;
  if (half) k.push_back(variant(Memory(name + ".to_half.bwd", bwd_pass, A * (e + 4)), U));
  k.push_back(variant(Memory(name + ".torch.bwd", bwd_pass, 12 * A), U));
  k.push_back(variant(Memory(name + ".mask.bwd", bwd_pass, 8 * A), U));
  k.push_back(variant(Memory(name + ".scale.bwd", bwd_pass, 8 * A), U));
  if (half) k.push_back(variant(Memory(name + ".to_fp32.bwd", bwd_pass, A * (4 + e)), U));
}

// A block's shape, per sample and per GPU of its tensor-parallel group.
struct BlockShape {
  double S, d, f, h, e;  // tokens (this GPU's: seq / context_parallel), model width, FFN width (per gate), heads, bytes per element
  double kv;             // width of K and of V: d kv_heads / heads
  double u;              // MLP GEMMs: 3 (swiglu: gate, up, down) or 2
  double c;              // share of the S x S scores a fused kernel computes: 1/2 causal, else 1
  bool gqa;              // fewer K and V heads than query heads
};

BlockShape ShapeOf(const TransformerSpec& s) {
  const double h = s.heads, g = s.kv_heads > 0 ? s.kv_heads : s.heads;
  const bool fused = s.attention == AttentionKind::kFused;
  return BlockShape{.S = double(s.seq) / s.context_parallel, .d = double(s.d_model), .f = double(s.ffn), .h = h,
                    .e = double(DtypeBytes(s.dtype)), .kv = double(s.d_model) * g / h,
                    .u = s.mlp == MlpKind::kSwiglu ? 3.0 : 2.0, .c = fused && s.causal ? 0.5 : 1.0, .gqa = g < h};
}

// A pre-norm block as Megatron-LM runs it, per sample and per GPU of its
// tensor-parallel group (S tokens, d model width, f FFN width, h heads of
// d/h, kv the width of K and V, e bytes per element, A = h S^2 attention
// scores). Forward: norm, QKV GEMM (d + 2 kv wide), [rotary embedding of Q
// and K: read and write S (d + kv)], the attention core, output projection,
// bias-dropout-residual, norm, FFN up (2f wide for swiglu: Megatron-Core
// runs gate and up as one GEMM), the activation (bias-GeLU or squared ReLU:
// read and write S f; SiLU-and-multiply: read 2 S f, write S f), FFN down,
// bias-dropout-residual. The attention core, unfused (Megatron's path):
// [K and V expanded to the h query heads: read 2 S kv, write 2 S d], scores
// (h batched S x S x d/h), scale-mask-softmax (AddSoftmax), dropout (1-byte
// mask), scores x V; fused: one flash-attention kernel, as a batched GEMM of
// 2 h (S x cS x d/h) (QK^T and PV, only the causal half when causal). Input
// backward: each GEMM's data gradient, the attention core's backward
// (unfused: four GEMMs; fused: 5 h of the same shape, the kernel recomputing
// QK^T), and every memory-bound kernel's backward (reading its saved input
// and output gradient, writing the input gradient; SiLU-and-multiply reads 3
// S f, writes 2 S f). Weight backward: each weight GEMM's gradient, and the
// bias gradients' reductions when there are biases. Tensor parallelism (tp):
// QKV and FFN-up split their outputs, the output projection and FFN-down
// their inputs, the heads and K/V heads divide; the collectives join them.
std::vector<Kernel> BlockKernels(const TransformerSpec& spec, const TensorParallel& tp, bool moe) {
  using P = Kernel::Pass;
  // Named copies, not a structured binding: lambdas below capture them (C++20 as clang 14 reads it).
  const BlockShape shape = ShapeOf(spec);
  const double S = shape.S, d = shape.d, f = shape.f, h = shape.h, e = shape.e, kv = shape.kv, u = shape.u, c = shape.c;
  const bool gqa = shape.gqa;
  const bool selective = spec.selective_recompute, causal = spec.causal;
  const bool fused = spec.attention == AttentionKind::kFused, rope = spec.position == PositionKind::kRope;
  const double t = tp.t, n = tp.norm();
  const double A = h / t * S * S, dh = d / h, hs = h / t;
  const double act = S * d * e;  // one S x d activation, the collectives' tensor
  const double rotary = 2 * S * (d + kv) / t * e, expand = 2 * S * (kv + d) / t * e;
  const bool fp8 = spec.dtype == Dtype::kFp8;
  const double cp = spec.context_parallel;
  // Multi-head latent attention: per head, queries and keys dqk wide (dn
  // without rotary, dr with), values dv; latents ql (Q) and kl (K, V).
  const bool mla = spec.Mla();
  const double dr = spec.qk_rope_head_dim, dn = mla ? spec.qk_head_dim : dh, dv = mla ? spec.v_head_dim : dh;
  const double dqk = mla ? dn + dr : dh, ql = spec.q_lora_rank, kl = spec.kv_lora_rank;
  // The context-parallel ring: the group's K and V (all S tokens), gathered
  // beside the attention kernel; in the backward, their gradients too.
  const double kv_all = (mla ? S * cp * hs * (dqk + dv) : 2 * S * cp * kv / t) * e;
  std::vector<Kernel> k;
  auto ring = [&](const std::string& name, P pass, Kernel::Collective kind) {
    k.push_back(Collective(name, pass, kind, kv_all, cp));
    k.back().over = Kernel::Over::kContext;
  };
  // The attention core's forward (again in the backward under selective recompute).
  auto core = [&](const std::string& suffix, P pass) {
    if (fused) {
      // With context parallelism c steps, each over one block of keys; QK^T
      // over dqk and PV over dv (both dh but with MLA), as 2 h GEMMs of their mean.
      k.push_back(Gemm("flash_attn" + suffix, pass, S, c * S, (dqk + dv) / 2, 2 * hs * cp, Kernel::Scaled::kBatch));
      k.back().launches = cp;
      k.back().output_on_chip = true;
      if (cp > 1) ring("cp.kv" + suffix, pass, Kernel::Collective::kAllGather);
      return;
    }
    if (gqa) k.push_back(Memory("kv.expand" + suffix, pass, expand));
    k.push_back(Gemm("scores" + suffix, pass, S, S, dh, hs, Kernel::Scaled::kBatch));
    AddSoftmax(k, "softmax" + suffix, pass, P::kInput, A, e, S, hs, causal, suffix.empty());
    k.push_back(Memory("attn_dropout" + suffix, pass, 2 * A * e + A));
    k.push_back(Gemm("attn_v" + suffix, pass, S, dh, S, hs, Kernel::Scaled::kBatch));
  };
  // FP8 (Transformer Engine): a norm that feeds a LayerNormLinear (QKV; a
  // dense block's FC1) writes its output in FP8 (and, not gathered, its
  // transpose too), and sequence parallelism gathers that FP8 copy, forward
  // and again for the weight gradient; a row-parallel linear's output
  // gradient is gathered in FP8 too (Fp8Operands).
  const double fp8_act = S * d;  // one S x d activation in FP8
  const double norm_fp8_write = tp.sp ? 1 : 2;
  auto norm_bytes = [&](bool feeds_fp8) { return (feeds_fp8 ? e + norm_fp8_write : 2 * e) * S * d / n; };
  // te_mlp: a dense block's MLP, Transformer Engine's LayerNormMLP linears.
  const bool qkv_from_norm = fp8 && !mla, te_mlp = fp8 && !moe;
  const Fp8Operands row_parallel{.grad_group = tp.sp ? t : 1};
  k.push_back(Memory("ln1", P::kForward, norm_bytes(qkv_from_norm)));
  tp.Gather(k, "ln1.allgather", P::kForward, qkv_from_norm ? fp8_act : act);
  // MLA: the rotary parts (each head's query, the one shared key) and the
  // queries' and keys' assembly from their parts (read and write both).
  const double mla_rotary = 2 * S * (hs + 1) * dr * e, mla_concat = 4 * S * hs * dqk * e;
  if (mla) {
    if (ql > 0) {
      AddLinear(k, "q_down", S, d, ql, fp8);
      k.push_back(Memory("q_norm", P::kForward, 2 * S * ql * e));
      AddLinear(k, "q_up", S, ql, hs * dqk, fp8);
    } else {
      AddLinear(k, "q", S, d, hs * dqk, fp8);
    }
    AddLinear(k, "kv_down", S, d, kl + dr, fp8);
    k.push_back(Memory("kv_norm", P::kForward, 2 * S * kl * e));
    AddLinear(k, "kv_up", S, kl, hs * (dn + dv), fp8);
    if (rope) k.push_back(Memory("rope", P::kForward, mla_rotary));
    k.push_back(Memory("qk.concat", P::kForward, mla_concat));
  } else {
    AddLinear(k, "qkv", S, d, (d + 2 * kv) / t, fp8, {.input_from_norm = true, .input_group = tp.sp ? t : 1});
    if (rope) k.push_back(Memory("rope", P::kForward, rotary));
  }
  core("", P::kForward);
  AddLinear(k, "proj", S, mla ? hs * dv : d / t, d, fp8, row_parallel);
  tp.Reduce(k, "proj.reduce", P::kForward, act);
  k.push_back(Memory("residual1", P::kForward, (3 * act + S * d) / n));
  k.push_back(Memory("ln2", P::kForward, norm_bytes(te_mlp)));
  // An MLP over the whole group's tokens: the dense block's, or an MoE
  // block's shared experts (Megatron's SharedExpertMLP gathers its input
  // and reduce-scatters its output itself); the routed experts' tokens
  // travel by the dispatcher's collectives instead.
  const bool dense_mlp = !moe || spec.shared_experts > 0;
  if (dense_mlp) tp.Gather(k, "ln2.allgather", P::kForward, te_mlp ? fp8_act : act);
  const std::string activation = spec.mlp == MlpKind::kGelu ? "gelu" : spec.mlp == MlpKind::kSwiglu ? "swiglu"
                                                                                                     : "squared_relu";
  const bool swiglu = spec.mlp == MlpKind::kSwiglu;
  // The MLP's activation kernels over `width` (per token, this GPU's share)
  // of `tokens` tokens: forward and backward bytes.
  std::vector<std::pair<std::string, double>> activations;  // name, S x width x e on this GPU
  auto mlp = [&](const std::string& prefix, double tokens, double width) {
    // A dense block's FC1 is a LayerNormLinear; an MoE block's shared
    // experts gather their input themselves (in BF16), as their output.
    const Fp8Operands fc1_ops{.input_from_norm = te_mlp, .input_group = tp.sp ? t : 1};
    AddLinear(k, prefix + "fc1", tokens, d, (swiglu ? 2 : 1) * width / t, fp8, fc1_ops);
    const double per = tokens * width / t * e;
    k.push_back(Memory(prefix + activation, P::kForward, (swiglu ? 3 : 2) * per));
    activations.emplace_back(prefix + activation, per);
    AddLinear(k, prefix + "fc2", tokens, width / t, d, fp8, moe ? Fp8Operands{} : row_parallel);
  };
  // MoE as Megatron-Core's all-to-all dispatcher runs it (tensor
  // parallelism comes with sequence parallelism there, Config's rule): the
  // router, in the model's dtype, and the first permutation (each token to
  // its r copies) on this GPU's shard of the tokens, S / n.
  const double E = spec.experts, r = spec.RoutedPerToken(), fe = spec.ExpertFfn(), top_k = spec.top_k;
  const double Sn = S / n, routed = r * S;
  const double permute = Sn * d * e * (1 + r);
  // Expert parallelism: E / ep experts here, each over S r ep / E tokens
  // (on the busiest GPU, with skewed routing, `load` times them).
  const double ep = spec.expert_parallel, local_experts = E / ep, load = moe ? spec.BusiestExpertGpuLoad() : 1;
  const double et = spec.ExpertTensorParallel(), expert_tokens = routed * et / t * load;
  const bool split_experts = !spec.grouped_gemm && local_experts > 1;
  auto all_to_all = [&](const std::string& name, P pass) {
    if (ep <= 1) return;
    k.push_back(Collective(name, pass, Kernel::Collective::kAllToAll, r * Sn * d * e * load, ep));
    k.back().over = Kernel::Over::kExpert;
  };
  // After the dispatch each GPU holds the copies routed to its experts from
  // its own shard; an expert split over et GPUs needs its group's: the
  // dispatcher all-gathers them over those et GPUs (the expert_tokens
  // copies the experts run over) and reduce-scatters the experts' outputs
  // before the combine, in series (Transformer Engine's overlap covers its
  // own linear layers only); the backward runs the reverse of each.
  // (Without sequence parallelism, which Config refuses for an MoE but a
  // bare spec may ask: every GPU routes all the tokens, the gather has
  // nothing to do and the output's partial sums are all-reduced; such a
  // spec is modelled for et = t only, where every GPU runs the r S copies.)
  const TensorParallel expert_group{et, tp.sp};
  // With several experts on a GPU the copies arrive grouped by their source
  // GPU; they are sorted by expert before the experts and back after (a
  // copy: read and written), again in the backward.
  auto sort_by_expert = [&](const std::string& name, P pass) {
    if (local_experts > 1) k.push_back(Memory(name, pass, 2 * expert_tokens * d * e));
  };
  // The experts' GEMMs: balanced, E / e alike; skewed, the hot expert's
  // beside the cold ones' (the mean m = routed * et / t / local_experts).
  auto experts_linear = [&](const std::string& name, double in, double out) {
    const double m = routed * et / t / local_experts;
    if (spec.routing_skew == 0) {
      AddExpertLinear(k, name, m, in, out, local_experts, spec.grouped_gemm, fp8);
      return;
    }
    AddExpertLinear(k, name + ".hot", m * spec.HotExpertLoad(), in, out, 1, spec.grouped_gemm, fp8);
    if (local_experts > 1) {
      AddExpertLinear(k, name, m * spec.ColdExpertLoad(), in, out, local_experts - 1, spec.grouped_gemm, fp8, true);
    }
  };
  // The all-gather dispatcher: the et x e GPUs of the expert group each
  // gather all `gathered` tokens of the group (and their routing), take the
  // copies routed to their experts (already grouped by expert: a read and a
  // write of each), and after the experts scatter-add the weighted outputs
  // into a zeroed buffer of the gathered tokens, which a reduce-scatter
  // over the group returns to each GPU's shard; the backward the reverse.
  const bool gather_dispatch = spec.dispatcher == MoeDispatcher::kAllGather;
  const double dispatch_group = et * ep, gathered = dispatch_group * Sn;
  // Without expert parallelism the group is the et GPUs of the tensor-
  // parallel group: a tensor-parallel collective, not one an overlapped
  // F/B pair hides (as the all-to-all dispatcher's et gather is not).
  auto group_collective = [&](const std::string& name, P pass, Kernel::Collective kind) {
    if (dispatch_group <= 1) return;
    k.push_back(Collective(name, pass, kind, gathered * d * e, dispatch_group));
    if (ep > 1) k.back().over = Kernel::Over::kExpert;
  };
  const double select = 2 * expert_tokens * d * e, scatter_add = gathered * d * e + 3 * expert_tokens * d * e;
  if (moe) {
    AddLinear(k, "router", Sn, d, E);
    k.push_back(Memory("router.topk", P::kForward, (8 * E + 8 * top_k) * Sn));
    // Around the top-k, Megatron-Core's router issues small eager kernels
    // over the Sn x E logits (moe_utils.py's topk_softmax_with_capacity and
    // switch_load_balancing_loss_func, router.py's aux-loss balancing,
    // core_v0.12.0): its launches cost their issue and their GPU floor, their
    // bytes (at most 4 an element read and written) little.
    k.push_back(Tiny("router.select", P::kForward, RouterLaunches(spec).forward, Sn * E));
    // The tokens each expert takes, summed over the tensor and context-
    // parallel group for the auxiliary loss (int64 counts): latency.
    if (t * cp > 1) {
      k.push_back(Collective("router.aux_loss.allreduce", P::kForward, Kernel::Collective::kAllReduce, 8 * E, t * cp));
      if (cp > 1) k.back().over = Kernel::Over::kContext;
    }
    if (gather_dispatch) {
      group_collective("dispatch", P::kForward, Kernel::Collective::kAllGather);
      k.push_back(Memory("permute", P::kForward, select));
    } else {
      k.push_back(Memory("permute", P::kForward, permute));
      all_to_all("dispatch", P::kForward);
      expert_group.Gather(k, "experts.gather", P::kForward, expert_tokens * d * e);
      sort_by_expert("experts.sort", P::kForward);
    }
    experts_linear("experts.fc1", d, (swiglu ? 2 : 1) * fe / et);
    const double per = expert_tokens * fe / et * e;
    k.push_back(Memory("experts." + activation, P::kForward, (swiglu ? 3 : 2) * per));
    activations.emplace_back("experts." + activation, per);
    experts_linear("experts.fc2", fe / et, d);
    // One GEMM per expert (SequentialMLP): the routed copies are split into
    // views per expert and the experts' outputs concatenated, a copy; the
    // split's gradient is the concatenation of the experts' input gradients.
    if (split_experts) k.push_back(Memory("experts.cat", P::kForward, 2 * expert_tokens * d * e));
    if (gather_dispatch) {
      k.push_back(Memory("unpermute", P::kForward, scatter_add));
      group_collective("combine", P::kForward, Kernel::Collective::kReduceScatter);
    } else {
      sort_by_expert("experts.unsort", P::kForward);
      expert_group.Reduce(k, "experts.reduce", P::kForward, expert_tokens * d * e);
      all_to_all("combine", P::kForward);
      k.push_back(Permutation("unpermute", P::kForward, CombineBytes(Sn * d * e, r * Sn * d * e, r * Sn)));
    }
    if (spec.shared_experts > 0) mlp("shared.", S, spec.shared_experts * fe);
  } else {
    mlp("", S, f);
  }
  if (dense_mlp) tp.Reduce(k, "fc2.reduce", P::kForward, act);
  k.push_back(Memory("residual2", P::kForward, (3 * act + S * d) / n));
  // Selective recompute: the attention core's forward again, in the backward.
  if (selective) core(".recompute", P::kInput);
  if (fused) {
    // Recomputed QK^T, dQ and dK over dqk; dP and dV over dv.
    k.push_back(Gemm("flash_attn.bwd", P::kInput, S, c * S, (3 * dqk + 2 * dv) / 5, 5 * hs * cp,
                     Kernel::Scaled::kBatch));
    k.back().launches = cp;
    k.back().output_on_chip = true;
    if (cp > 1) {
      ring("cp.kv.bwd", P::kInput, Kernel::Collective::kAllGather);
      ring("cp.dkv", P::kInput, Kernel::Collective::kReduceScatter);
    }
  } else {
    // The attention core's backward: dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q.
    k.push_back(Gemm("attn_v.dprobs", P::kInput, S, S, dh, hs, Kernel::Scaled::kBatch));
    k.push_back(Gemm("attn_v.dv", P::kInput, S, dh, S, hs, Kernel::Scaled::kBatch));
    k.push_back(Gemm("scores.dq", P::kInput, S, dh, S, hs, Kernel::Scaled::kBatch));
    k.push_back(Gemm("scores.dk", P::kInput, S, dh, S, hs, Kernel::Scaled::kBatch));
    k.push_back(Memory("attn_dropout.bwd", P::kInput, 2 * A * e + A));
    if (gqa) k.push_back(Memory("kv.expand.bwd", P::kInput, expand));  // sums the h heads' gradients into g
  }
  if (rope) k.push_back(Memory("rope.bwd", P::kInput, mla ? mla_rotary : rotary));
  if (mla) {
    k.push_back(Memory("qk.concat.bwd", P::kInput, mla_concat));
    if (ql > 0) k.push_back(Memory("q_norm.bwd", P::kInput, 3 * S * ql * e));
    k.push_back(Memory("kv_norm.bwd", P::kInput, 3 * S * kl * e));
  }
  k.push_back(Memory("ln1.bwd", P::kInput, 3 * act / n));
  k.push_back(Memory("ln2.bwd", P::kInput, 3 * act / n));
  for (const auto& [name, per] : activations) k.push_back(Memory(name + ".bwd", P::kInput, (swiglu ? 5 : 3) * per));
  if (moe) {
    k.push_back(Memory("router.topk.bwd", P::kInput, 12 * E * Sn));
    k.push_back(Tiny("router.select.bwd", P::kInput, RouterLaunches(spec).backward, Sn * E));
    if (split_experts) k.push_back(Memory("experts.split.bwd", P::kInput, 2 * expert_tokens * d * e));
    if (gather_dispatch) {
      // The unpermutation's gradient is a gather of the copies, the
      // permutation's a scatter-add into the gathered tokens.
      group_collective("combine.bwd", P::kInput, Kernel::Collective::kAllGather);
      k.push_back(Memory("unpermute.bwd", P::kInput, select));
      k.push_back(Memory("permute.bwd", P::kInput, scatter_add));
      group_collective("dispatch.bwd", P::kInput, Kernel::Collective::kReduceScatter);
    } else {
      k.push_back(Permutation("permute.bwd", P::kInput, PermuteGradientBytes(Sn * d * e, r * Sn * d * e)));
      k.push_back(Permutation("unpermute.bwd", P::kInput, CombineGradientBytes(Sn * d * e, r * Sn * d * e, r * Sn)));
      all_to_all("combine.bwd", P::kInput);
      expert_group.Gather(k, "experts.reduce.bwd", P::kInput, expert_tokens * d * e);
      sort_by_expert("experts.unsort.bwd", P::kInput);
      sort_by_expert("experts.sort.bwd", P::kInput);
      expert_group.Reduce(k, "experts.gather.bwd", P::kInput, expert_tokens * d * e);
      all_to_all("dispatch.bwd", P::kInput);
    }
  }
  k.push_back(Memory("residual1.bwd", P::kInput, (2 * act + S * d) / n));
  k.push_back(Memory("residual2.bwd", P::kInput, (2 * act + S * d) / n));
  // Backward of the collectives: a row-parallel GEMM's input gradient is
  // gathered (sequence parallel), a column-parallel one's reduced.
  tp.Gather(k, "proj.reduce.bwd", P::kInput, fp8 ? fp8_act : act);
  if (dense_mlp) tp.Gather(k, "fc2.reduce.bwd", P::kInput, te_mlp ? fp8_act : act);
  tp.Reduce(k, "qkv.dgrad.reduce", P::kInput, act);
  if (dense_mlp) tp.Reduce(k, "fc1.dgrad.reduce", P::kInput, act);
  // Sequence parallel: a column-parallel GEMM keeps only its shard of the
  // (normed) input, so Megatron gathers it again for the weight gradient.
  tp.Gather(k, "qkv.wgrad.allgather", P::kWeight, qkv_from_norm ? fp8_act : act);
  if (dense_mlp) tp.Gather(k, "fc1.wgrad.allgather", P::kWeight, te_mlp ? fp8_act : act);
  // The FFN-up biases' gradient sums over the tokens that pass it.
  const double up_bias = moe ? r * load * fe + spec.shared_experts * fe : f;
  if (spec.bias) k.push_back(Memory("bias.wgrad", P::kWeight, S * (4 * d + 2 * kv + (u - 1) * up_bias) / t * e));
  for (const char* suffix : {"", ".recompute"}) Beside(k, std::string("cp.kv") + suffix, std::string("flash_attn") + suffix, 0);
  Beside(k, "cp.kv.bwd", "flash_attn.bwd", 0);
  Beside(k, "cp.dkv", "flash_attn.bwd", 0);
  if (spec.tp_comm_overlap && tp.sp) {
    // Userbuffers: a ring of t chunks beside the GEMM each collective feeds
    // or follows (the first or last chunk shows); the weight gradients'
    // all-gathers beside the data-gradient GEMMs, and the data gradients'
    // reduce-scatters beside the weight-gradient GEMMs (bulk overlaps). In
    // an MoE block the MLP's collectives are its shared experts' (an MLP of
    // Transformer Engine linears too).
    const std::string mlp_gemm = moe ? "shared.fc" : "fc";
    for (const auto& [collective, gemm] :
         std::vector<std::pair<std::string, std::string>>{{"ln1.allgather", "qkv"}, {"proj.reduce", "proj"},
                                                          {"ln2.allgather", mlp_gemm + "1"},
                                                          {"fc2.reduce", mlp_gemm + "2"},
                                                          {"proj.reduce.bwd", "proj.dgrad"},
                                                          {"fc2.reduce.bwd", mlp_gemm + "2.dgrad"}}) {
      Beside(k, collective, gemm, 1 / t);
    }
    Beside(k, "qkv.wgrad.allgather", "qkv.dgrad", 0);
    Beside(k, "fc1.wgrad.allgather", mlp_gemm + "1.dgrad", 0);
    Beside(k, "qkv.dgrad.reduce", "qkv.wgrad", 0);
    Beside(k, "fc1.dgrad.reduce", mlp_gemm + "1.wgrad", 0);
  }
  return KeepingGradients(std::move(k), spec);
}

}  // namespace

Model GenerateTransformer(const TransformerSpec& spec) {
  using P = Kernel::Pass;
  // S: the tokens of a sample on this GPU (all of them without context parallelism).
  const double S_all = spec.seq, S = S_all / spec.context_parallel;
  const double d = spec.d_model, f = spec.ffn, V = spec.vocab, h = spec.heads;
  const double e = DtypeBytes(spec.dtype);
  const TensorParallel tp{static_cast<double>(spec.tensor_parallel), spec.sequence_parallel && spec.tensor_parallel > 1};
  const double t = tp.t, n = tp.norm();
  const double act = S * d * e;
  const BlockShape shape = ShapeOf(spec);
  const double kv = shape.kv, u = shape.u, c = shape.c;
  const bool rope = spec.position == PositionKind::kRope, fused = spec.attention == AttentionKind::kFused;
  const double norm_params = spec.norm == NormKind::kRmsNorm ? d : 2 * d;  // scale (and shift)
  Model m;
  m.dtype = spec.dtype;
  m.input_bytes = S * 4;  // int32 token ids
  // Vocabulary-parallel: each GPU gathers the rows it holds; the partial
  // embeddings are reduced (or reduce-scattered) across the group.
  // Rotary positions: no table to add (each block rotates Q and K).
  std::vector<Kernel> embedding{Memory("gather", P::kForward, 2 * act)};
  if (!rope) embedding.push_back(Memory("positions", P::kForward, 3 * act / n));
  embedding.push_back(Memory("dropout", P::kForward, (2 * act + S * d) / n));
  embedding.push_back(Memory("dropout.bwd", P::kWeight, (2 * act + S * d) / n));
  embedding.push_back(Memory("scatter", P::kWeight, 3 * act));
  tp.Reduce(embedding, "embedding.reduce", P::kForward, act);
  tp.Gather(embedding, "embedding.reduce.bwd", P::kWeight, act);
  const double embedding_params = V * d / t + (rope ? 0 : S_all * d);
  m.layers.push_back(Layer{.name = "embedding",
                           .kind = "embedding",
                           .fwd_flops = rope ? 0 : S * d / n,  // adds the position embedding
                           .bwd_input_flops = 0,
                           .bwd_weight_flops = S * d,
                           .params = embedding_params,
                           .out_bytes = act / t,
                           .stash_bytes = S * 4,
                           .kernels = std::move(embedding)});
  // The attention's GEMMs and weights: QKV and the output projection, split
  // over t; with MLA, the up-projections and the output projection split,
  // the down-projections (and their norms) replicated on every GPU.
  const bool mla = spec.Mla();
  const double dr = spec.qk_rope_head_dim, dn = mla ? spec.qk_head_dim : d / h, dv = mla ? spec.v_head_dim : d / h;
  const double dqk = mla ? dn + dr : d / h, ql = spec.q_lora_rank, kl = spec.kv_lora_rank;
  const double q_in = ql > 0 ? ql : d;  // Q's up-projection reads its latent, or the input
  const double attn_split_params = mla ? q_in * h * dqk + kl * h * (dn + dv) + h * dv * d
                                       : d * (d + 2 * kv) + d * d + (spec.bias ? d + 2 * kv : 0);
  const double attn_replicated_params = mla ? d * ql + ql + d * (kl + dr) + kl : 0;
  const double attn_split_flops = mla ? 2 * S * (q_in * h * dqk + kl * h * (dn + dv) + h * dv * d)
                                      : 2 * S * d * (d + 2 * kv) + 2 * S * d * d;
  const double attn_replicated_flops = mla ? 2 * S * (d * ql + d * (kl + dr)) : 0;
  // QKV, output projection and the MLP's u GEMMs (integers: exact in any order).
  const double matmul = (attn_split_flops + 2 * u * S * d * f) / t + attn_replicated_flops;
  // An MoE block's: the attention's, the router's on this GPU's tokens
  // (replicated across the group), the experts' over the routed tokens and
  // the shared experts'.
  // With skewed routing, the busiest GPU's routed copies (rl per token).
  const double E = spec.experts, fe = spec.ExpertFfn(), ns = spec.shared_experts;
  const double r = spec.RoutedPerToken() * (E > 1 ? spec.BusiestExpertGpuLoad() : 1);
  const double moe_matmul = (attn_split_flops + 2 * u * S * d * fe * (r + ns)) / t + attn_replicated_flops +
                            2 * (S / n) * d * E;
  // Korthikanti et al.'s per-layer activations in 16-bit units, scaled to e;
  // the block's changes (see the header) adjust the tensor-parallel part.
  const double scores = spec.selective_recompute || fused ? 0 : 5 * h * S / (d * t);
  double stash_units = tp.sp ? 34 / t + scores : t > 1 ? 10 + 24 / t + scores : 34 + scores;
  // Korthikanti's 24 units split by t are Q, K and V (6), the output
  // projection's input (2) and the MLP's 16 (GeLU's input and output, 8
  // each at f = 4d); in general the MLP keeps its up-projection's output and
  // the down-projection's input: 4f/d (GeLU, squared ReLU) or 6f/d (SwiGLU:
  // gate and up, 2f wide, and their product), and fused attention keeps K
  // and V unexpanded (4 kv/d). With FP8, Transformer Engine keeps its GEMMs'
  // inputs as their FP8 casts: half of the QKV and FC1 inputs (2 of the 10
  // units not split without sequence parallelism), of the projection's
  // input and of FC2's.
  // An MoE block's MLP part: the experts' over the r routed copies of each
  // token and the shared experts', the routed copies in and out of the
  // experts (4 r) and the router's fp32 probabilities (2 E / d), not split;
  // in FP8 the experts' and shared experts' inputs as FP8 casts.
  auto stash_of = [&](bool moe) {
    const double mlp_width = moe ? fe * (r + ns) : spec.experts == 1 ? fe : f;
    const double mlp_units = (u == 3 ? 6 : 4) * mlp_width / d;
    // MLA: Q and K of dqk, V and the projection's input of dv per head (8
    // units at dqk = dv = d / h), and the latents on every GPU.
    double split_change = mlp_units - 16 + (mla ? 4 * h * (dqk + dv) / d - 8 : fused ? -4 * (1 - kv / d) : 0);
    double unsplit_change = moe ? 4 * r * spec.ExpertTensorParallel() / t + 2 * E / d : 0;
    if (spec.dtype == Dtype::kFp8) {
      split_change -= 1 + mlp_width / d;
      unsplit_change -= moe ? 1 + r * spec.ExpertTensorParallel() / t + (ns > 0 ? 1 : 0) : 2;
    }
    double units = stash_units;
    if (mla) units += (4 * ql + 4 * kl + 2 * dr) / d;  // q_down's and q_norm's outputs, kv_down's and kv_norm's
    if (split_change != 0) units += split_change / t;
    if (unsplit_change != 0) units += unsplit_change / (moe ? 1 : n);
    return units;
  };
  // The attention core: unfused, the full scores and four GEMMs in the
  // backward; fused, the causal share c and the scores recomputed in the backward.
  const double core = mla ? c * 2 * S * S_all * h * (dqk + dv) / t  // QK^T over dqk, PV over dv
                          : (fused ? c : 1) * 4 * S * S_all * d / t;  // 1/c of the keys' work with context parallelism
  const double core_bwd = mla ? c * 2 * S * S_all * h * (3 * dqk + 2 * dv) / t : fused ? 2.5 * core : 2 * core;
  // Biases: QKV's and FFN-up's split, the output projection's and FFN-down's
  // replicated (as the norms are); whole numbers, summed before dividing.
  const double split_params = attn_split_params + u * d * f + (spec.bias ? (u - 1) * f : 0);
  const double replicated_params = (spec.bias ? 2 * d : 0) + 2 * norm_params + attn_replicated_params;
  // MoE: every expert's MLP (with its biases: FFN-up's split, FFN-down's
  // per expert), the shared experts' as one MLP; the router replicated.
  // With expert parallelism e, E / e experts on a GPU.
  const double El = E / spec.expert_parallel, et = spec.ExpertTensorParallel();
  // The experts' weights split over et GPUs, the rest over t (integers
  // summed before dividing: exact).
  const double moe_split_params = attn_split_params + u * d * fe * ns + (spec.bias ? (u - 1) * fe * ns : 0) +
                                  (et == t ? u * d * fe * El + (spec.bias ? (u - 1) * fe * El : 0) : 0);
  const double expert_params = et == t ? 0 : (u * d * fe * El + (spec.bias ? (u - 1) * fe * El : 0)) / et;
  const double moe_replicated_params = replicated_params + d * E + (spec.bias ? d * (El - 1 + (ns > 0 ? 1 : 0)) : 0);
  const Kernels dense_kernels = BlockKernels(spec, tp, false);
  const Kernels moe_kernels = spec.experts > 1 ? BlockKernels(spec, tp, true) : Kernels{};
  // E = 1 routes nothing: a dense MLP of the expert's width.
  TransformerSpec dense_spec = spec;
  if (spec.experts == 1) dense_spec.ffn = spec.ExpertFfn();
  const double dense_f = dense_spec.ffn;
  const double dense_matmul = (attn_split_flops + 2 * u * S * d * dense_f) / t + attn_replicated_flops;
  const double dense_split_params = attn_split_params + u * d * dense_f + (spec.bias ? (u - 1) * dense_f : 0);
  const Kernels expert_dense_kernels = spec.experts == 1 ? BlockKernels(dense_spec, tp, false) : Kernels{};
  for (int i = 0; i < spec.layers; ++i) {
    const bool moe = spec.IsMoeBlock(i);
    const double mm = moe ? moe_matmul : spec.experts == 1 ? dense_matmul : matmul;
    m.layers.push_back(Layer{.name = fmt::format("block{}", i),
                             .kind = "transformer_block",
                             .fwd_flops = mm + core,
                             .bwd_input_flops = mm + core_bwd + (spec.selective_recompute ? core : 0),
                             .bwd_weight_flops = mm,
                             .params = moe ? moe_split_params / t + expert_params + moe_replicated_params
                                           : (spec.experts == 1 ? dense_split_params : split_params) / t +
                                                 replicated_params,
                             .expert_params = moe ? (u * d * fe * El + (spec.bias ? (u - 1) * fe * El : 0)) / et +
                                                        (spec.bias ? d * El : 0)
                                                  : 0,
                             .out_bytes = act / t,
                             .stash_bytes = S * d * stash_of(moe) * (e / 2),
                             .input_replicas = t / n,  // each GPU holds the whole S x d input without sp
                             .kernels = moe ? moe_kernels : spec.experts == 1 ? expert_dense_kernels : dense_kernels});
  }
  // Final layernorm, vocabulary projection, and Megatron's vocabulary-
  // parallel cross-entropy (tensor_parallel/cross_entropy.py) in fp32, each
  // GPU over its V/t logits per token, as its kernels: cast the logits (e + 4
  // bytes a logit), row max (4), subtract it (8), exp (8), sum (4),
  // normalise in place (8); backward: scale by the loss's gradient in place
  // (8), cast back (4 + e). The row maxima, the target logits and the sums of
  // exponentials are all-reduced across the group as S fp32 scalars each.
  // Around them run kernels over the S tokens alone, which cost their issue
  // time (counted call by call, Tiny: one framework op each): forward, the
  // target's range mask (3), the masked target (3), the target logits'
  // gather (3), log and subtract (2), the transposes of the labels and the
  // loss (2), the loss's masked mean and its average across replicas (6);
  // backward, the one-hot update (6) and the masked mean's and the
  // transpose's gradients (4). Activation checkpointing wraps the blocks
  // only: the head keeps its activations.
  const double logits = S * V / t;
  std::vector<Kernel> head{Memory("ln_f", P::kForward, 2 * act / n),
                           Memory("cross_entropy.max", P::kForward, 4 * logits),
                           Memory("cross_entropy.sub_max", P::kForward, 8 * logits),
                           Memory("cross_entropy.exp", P::kForward, 8 * logits),
                           Memory("cross_entropy.sum", P::kForward, 4 * logits),
                           Memory("cross_entropy.normalise", P::kForward, 8 * logits),
                           Memory("cross_entropy.scale.bwd", P::kInput, 8 * logits),
                           Memory("ln_f.bwd", P::kInput, 3 * act / n)};
  if (e != 4) {
    head.push_back(Memory("logits.to_fp32", P::kForward, (e + 4) * logits));
    head.push_back(Memory("logits.to_fp32.bwd", P::kInput, (4 + e) * logits));
  }
  head.push_back(Tiny("loss.tokens", P::kForward, 19, S));
  head.push_back(Tiny("loss.tokens.bwd", P::kInput, 10, S));
  tp.Gather(head, "ln_f.allgather", P::kForward, act);
  if (t > 1) {
    for (const char* name : {"cross_entropy.max", "cross_entropy.sum", "cross_entropy.target"}) {
      head.push_back(
          Collective(fmt::format("{}.allreduce", name), P::kForward, Kernel::Collective::kAllReduce, S * 4, t));
    }
  }
  AddLinear(head, "logits", S, d, V / t);
  // The input gradient of the column-parallel logits: reduced across the group.
  tp.Reduce(head, "logits.dgrad.reduce", P::kInput, act);
  tp.Gather(head, "logits.wgrad.allgather", P::kWeight, act);
  if (spec.tp_comm_overlap && tp.sp) {
    // Megatron's output layer is not a Transformer Engine linear (no
    // userbuffers), but its backward overlaps the same way the blocks' do:
    // the input's all-gather for the weight gradient beside the data-gradient
    // GEMM, that gradient's reduce-scatter beside the weight-gradient GEMM
    // (LinearWithGradAccumulationAndAsyncCommunication).
    Beside(head, "logits.wgrad.allgather", "logits.dgrad", 0);
    Beside(head, "logits.dgrad.reduce", "logits.wgrad", 0);
  }
  const double head_params = ((spec.tied_embeddings ? 0 : d * V) + (spec.bias ? V : 0)) / t + norm_params;
  m.layers.push_back(Layer{.name = "head",
                           .kind = "head",
                           .fwd_flops = 2 * S * d * V / t,
                           .bwd_input_flops = 2 * S * d * V / t,
                           .bwd_weight_flops = 2 * S * d * V / t,
                           .params = head_params,
                           .out_bytes = 4,  // the loss
                           .stash_bytes = S * d * e / n + logits * 4,
                           .rematerialized = false,
                           .kernels = KeepingGradients(std::move(head), spec),
                           .shares_weights_of = spec.tied_embeddings ? 0 : -1,
                           .shared_params = spec.tied_embeddings ? d * V / t : 0});
  return m;
}

Model GenerateMlp(const MlpSpec& s) {
  const double w = s.width, in = s.input, c = s.classes, e = DtypeBytes(s.dtype);
  const double norm_params = s.norm == Norm::kNone ? 0 : 2 * w;
  Model m;
  m.dtype = s.dtype;
  m.input_bytes = in * e;
  m.layers.push_back(Layer{.name = "input",
                           .kind = "linear",
                           .fwd_flops = 2 * in * w,
                           .bwd_input_flops = 2 * in * w,
                           .bwd_weight_flops = 2 * in * w,
                           .params = in * w + w,
                           .out_bytes = w * e,
                           .stash_bytes = (in + w) * e});
  for (int i = 1; i + 1 < s.layers; ++i) {
    m.layers.push_back(Layer{.name = fmt::format("block{}", i),
                             .kind = s.residual ? "residual_block" : "block",
                             .fwd_flops = 2 * w * w,
                             .bwd_input_flops = 2 * w * w,
                             .bwd_weight_flops = 2 * w * w,
                             .params = w * w + w + norm_params,
                             .out_bytes = w * e,
                             .stash_bytes = (s.norm == Norm::kNone ? 2 : 3) * w * e});
  }
  m.layers.push_back(Layer{.name = "head",
                           .kind = "head",
                           .fwd_flops = 2 * w * c,
                           .bwd_input_flops = 2 * w * c,
                           .bwd_weight_flops = 2 * w * c,
                           .params = w * c + c,
                           .out_bytes = 4,
                           .stash_bytes = (w + c) * e});
  return m;
}

std::vector<CnnConv> CnnConvs(const CnnSpec& s) {
  std::vector<CnnConv> convs{{s.in_channels, s.channels, s.image, 1}};
  // Reduction blocks spaced evenly: block i reduces when i * (r + 1) / L
  // crosses an integer (at most `reductions` of them, none at block 0).
  int done = 0, ch = s.channels, side = s.image;
  for (int i = 0; i < s.layers; ++i) {
    const bool reduce = done < s.reductions && (i + 1) * (s.reductions + 1) / (s.layers + 1) > done;
    done += reduce;
    const CnnConv conv{ch, reduce ? 2 * ch : ch, side, reduce ? 2 : 1};
    convs.push_back(conv);
    ch = conv.out_channels;
    side = conv.out_side();
  }
  return convs;
}

Model GenerateCnn(const CnnSpec& s) {
  const double e = DtypeBytes(s.dtype);
  Model m;
  m.dtype = s.dtype;
  m.input_bytes = double(s.image) * s.image * s.in_channels * e;
  const auto convs = CnnConvs(s);
  for (size_t i = 0; i < convs.size(); ++i) {
    const CnnConv& c = convs[i];
    const double c_in = c.in_channels, c_out = c.out_channels, in_hw = c.in_side, out_hw = c.out_side();
    const double flops = 2 * out_hw * out_hw * c_in * c_out * 9;
    const bool reduce = c.stride == 2;
    m.layers.push_back(Layer{.name = i == 0 ? "stem" : fmt::format("{}{}", reduce ? "reduce" : "conv", i - 1),
                             .kind = "conv",
                             .fwd_flops = flops,
                             .bwd_input_flops = flops,
                             .bwd_weight_flops = flops,
                             .params = c_in * c_out * 9 + 2 * c_out,  // weights + batchnorm scale and shift
                             .out_bytes = out_hw * out_hw * c_out * e,
                             // the conv input (weight gradient), the batchnorm input and the relu output
                             .stash_bytes = (in_hw * in_hw * c_in + out_hw * out_hw * 2 * c_out) * e});
  }
  const double hw = convs.back().out_side(), ch = convs.back().out_channels;
  m.layers.push_back(Layer{.name = "head",
                           .kind = "head",
                           .fwd_flops = hw * hw * ch + 2 * ch * s.classes,
                           .bwd_input_flops = hw * hw * ch + 2 * ch * s.classes,
                           .bwd_weight_flops = 2 * ch * s.classes,
                           .params = ch * s.classes + s.classes,
                           .out_bytes = 4,
                           .stash_bytes = (hw * hw * ch + ch + s.classes) * e});
  return m;
}

}  // namespace twinpipe::cost
