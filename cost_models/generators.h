// Model generators: transformer, MLP and CNN stacks with per-layer FLOPs,
// parameters and bytes per sample, in closed form (see each function).
//
//   Model m = GenerateTransformer({.layers = 24, .d_model = 1024, .ffn = 4096,
//                                  .heads = 16, .seq = 512, .vocab = 32000});
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cost_models/model.h"
#include "ir/name_table.h"

namespace twinpipe::cost {

// How a transformer block is built (the config's /model keys of the same
// names; the first of each table is today's GPT block, the default).
enum class MlpKind { kGelu, kSwiglu, kSquaredRelu };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kRope };
enum class AttentionKind { kUnfused, kFused };
// Megatron-Core's MoE token dispatchers (--moe-token-dispatcher-type).
enum class MoeDispatcher { kAllToAll, kAllGather };
inline constexpr ir::NameTable<MoeDispatcher, 2> kMoeDispatcherNames{{
    {"alltoall", MoeDispatcher::kAllToAll}, {"allgather", MoeDispatcher::kAllGather}}};
inline constexpr ir::NameTable<MlpKind, 3> kMlpKindNames{{
    {"gelu", MlpKind::kGelu}, {"swiglu", MlpKind::kSwiglu}, {"squared-relu", MlpKind::kSquaredRelu}}};
inline constexpr ir::NameTable<NormKind, 2> kNormKindNames{{
    {"layernorm", NormKind::kLayerNorm}, {"rmsnorm", NormKind::kRmsNorm}}};
inline constexpr ir::NameTable<PositionKind, 2> kPositionKindNames{{
    {"learned", PositionKind::kLearned}, {"rope", PositionKind::kRope}}};
inline constexpr ir::NameTable<AttentionKind, 2> kAttentionKindNames{{
    {"unfused", AttentionKind::kUnfused}, {"fused", AttentionKind::kFused}}};

struct TransformerSpec {
  int layers = 1;       // transformer blocks
  int d_model = 64;
  int ffn = 256;
  int heads = 4;
  int seq = 16;
  int vocab = 100;
  bool causal = false;  // attention sees only earlier tokens (unfused: same FLOPs, the full S x S scores are computed)
  Dtype dtype = Dtype::kFp32;
  // The weight gradients kept across the micro-batches (/training/
  // gradient_dtype); unset: DefaultGradientDtype(dtype), Megatron's.
  std::optional<Dtype> gradient_dtype;
  Dtype GradientDtype() const { return gradient_dtype.value_or(DefaultGradientDtype(dtype)); }
  // Blocks as built now (defaults: GPT-2 / Megatron's GPT block).
  int kv_heads = 0;  // K and V heads (grouped-query attention; 1: multi-query); 0 means `heads`
  // Multi-head latent attention (DeepSeek-V2/V3, Megatron-Core's MLA), with
  // kv_lora_rank > 0 and fused attention: K and V of every head come up from
  // one kv_lora_rank-wide latent (kv_down: d -> kv_lora_rank + the shared
  // rotary key of qk_rope_head_dim, its RMSNorm, kv_up: -> heads x
  // (qk_head_dim + v_head_dim)), Q likewise from a q_lora_rank-wide one (0:
  // straight from the input); each head's queries and keys are qk_head_dim +
  // qk_rope_head_dim wide, its values v_head_dim. The down-projections and
  // norms are replicated across the tensor-parallel group, the
  // up-projections split by heads, the output projection (heads x
  // v_head_dim -> d) by its input. 0 for the dims means d / heads.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_head_dim = 0;
  int qk_rope_head_dim = 64;
  int v_head_dim = 0;
  bool Mla() const { return kv_lora_rank > 0; }
  MlpKind mlp = MlpKind::kGelu;                      // swiglu: `ffn` is the width of each of gate and up
  NormKind norm = NormKind::kLayerNorm;              // rmsnorm: a scale, no mean and no shift
  PositionKind position = PositionKind::kLearned;    // rope: no position table, a rotary kernel on Q and K
  bool bias = true;                                  // biases on the block's linears and the logits
  bool tied_embeddings = false;                      // true: the logits reuse the token embedding's weights
  AttentionKind attention = AttentionKind::kUnfused;  // fused: one flash-attention kernel
  // Megatron-LM's tensor parallelism (set from the config's pipeline
  // section): each layer describes one GPU of a group of t, which holds 1/t
  // of the weights and GEMMs; sequence parallelism also shards the
  // layernorms, dropouts and residuals along the sequence; selective
  // recompute keeps no attention scores and re-runs the attention core in
  // the backward.
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  bool selective_recompute = false;
  // Context parallelism (Megatron-Core / Transformer Engine): each GPU of a
  // group of c holds S / c tokens (fused attention only); the attention
  // passes K and V around the group's ring (an all-gather of them in the
  // forward, again with a reduce-scatter of their gradients in the
  // backward), beside the attention kernel, which runs in c steps.
  int context_parallel = 1;
  // Transformer Engine's userbuffers (sequence parallelism): each all-gather
  // and reduce-scatter of a block runs beside the GEMM it feeds or follows,
  // split in t chunks, of which one shows; the weight gradients' all-gathers
  // beside the data-gradient GEMMs.
  bool tp_comm_overlap = false;
  // Mixture of experts (issue 41; Megatron-Core's MoE layer, experts sharded
  // by the tensor-parallel group as NeMo's 24.x runs them). With experts E >
  // 1, block i is an MoE block when i % moe_every == 0 (Megatron's
  // moe_layer_freq): its MLP becomes a router (a d -> E GEMM on this GPU's
  // tokens, its top-k and auxiliary-loss kernels), the permutation of each
  // token to its top_k experts, the experts (each an MLP of `moe_ffn`, as
  // `mlp` says) over the tokens routed to them, the unpermutation with the
  // weighted combine, and `shared_experts` experts every token passes
  // through beside them. Balanced routing: each expert receives S top_k / E
  // tokens; with a capacity factor cf > 0 (token dropping, padded to the
  // capacity as pad_expert_input_to_capacity does) exactly cf S top_k / E.
  // E = 1 routes nothing: the block is dense with an MLP of moe_ffn.
  int experts = 0;
  int top_k = 1;
  int moe_ffn = 0;               // each expert's width (per gate with swiglu); 0 means ffn
  int shared_experts = 0;        // experts every token passes through (one MLP shared_experts x moe_ffn wide)
  int moe_every = 1;
  // The first blocks dense whatever moe_every (DeepSeek's first_k_dense_replace):
  // block i >= moe_first_dense is MoE when (i - moe_first_dense) % moe_every == 0.
  int moe_first_dense = 0;
  double capacity_factor = 0;    // 0: dropless
  bool grouped_gemm = true;      // the experts' GEMMs as one grouped kernel; false: E GEMMs of their own
  // Imbalanced dropless routing: the most-loaded expert receives (1 + s) x
  // the mean S top_k / E tokens and the other E - 1 alike less (0 <= s <=
  // E - 1). The busiest GPU of an expert-parallel group (the one holding
  // that expert) sets the pace: its experts' GEMMs (one hot expert beside
  // E / e - 1 cold ones), the routed copies it receives and keeps, and the
  // all-to-all it receives them by, as the group waits for it.
  double routing_skew = 0;
  // How routed tokens reach their experts' GPUs. kAllToAll: each GPU routes
  // its shard of the tokens and an all-to-all over the expert-parallel group
  // sends each copy to its expert's GPU (and back), the copies then gathered
  // over the et GPUs an expert is split across. kAllGather: every GPU of the
  // et x e group gathers all of the group's tokens, runs its experts over
  // those routed to them, and a reduce-scatter returns each GPU's share of
  // the combined outputs (its traffic grows with e whatever top_k).
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
  // Expert parallelism e (set from the config's pipeline section): each GPU
  // holds E / e experts and runs them over the tokens the e GPUs of its
  // expert-parallel group route to them (balanced: as many as it routes
  // itself); an all-to-all over the group sends each routed token to its
  // expert's GPU and one brings it back (dispatch and combine), both again
  // in the backward, each of r S d / n elements per GPU (n = t with sequence
  // parallelism: the shard of the tokens a GPU routes).
  int expert_parallel = 1;
  // Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size):
  // each expert split over et GPUs of the tensor-parallel group; 0 means t
  // (NeMo 24.x: experts sharded like the dense MLP). With et < t each GPU
  // runs whole-er experts (f_e / et) over its own share of the routed tokens
  // (r S et / t): the same FLOPs, et / t of the routed copies.
  int expert_tensor_parallel = 0;
  int ExpertTensorParallel() const { return expert_tensor_parallel > 0 ? expert_tensor_parallel : tensor_parallel; }
  bool IsMoeBlock(int block) const {
    return experts > 1 && block >= moe_first_dense && (block - moe_first_dense) % moe_every == 0;
  }
  int ExpertFfn() const { return moe_ffn > 0 ? moe_ffn : ffn; }
  // The tokens the experts process per token of the sequence: top_k, times
  // the capacity factor when tokens are padded to it.
  double RoutedPerToken() const { return top_k * (capacity_factor > 0 ? capacity_factor : 1.0); }
  // Per expert, over the mean: the hot expert's load (1 + s) and each other's (1 - s / (E - 1)).
  double HotExpertLoad() const { return 1 + routing_skew; }
  double ColdExpertLoad() const { return experts > 1 ? 1 - routing_skew / (experts - 1) : 1; }
  // The busiest GPU's routed tokens over the mean, with E / e experts each:
  // (hot + (E / e - 1) cold) / (E / e); 1 without skew, or with every
  // expert on each GPU (e = 1: the GPU's total is the mean whatever the skew).
  double BusiestExpertGpuLoad() const {
    const double local = static_cast<double>(experts) / expert_parallel;
    return (HotExpertLoad() + (local - 1) * ColdExpertLoad()) / local;
  }
};

// embedding (tokens + positions), `layers` pre-norm blocks, output head
// (final norm, vocabulary projection, softmax cross-entropy). Per sample
// (S = seq, d = d_model, f = ffn, V = vocab, h heads, g kv_heads, kv = d g / h
// the width of K and of V, c = 1/2 with causal fused attention and 1
// otherwise, u = 3 for swiglu and 2 otherwise), matmul FLOPs:
//   QKV 2Sd(d + 2kv), output projection 2Sd^2, MLP 2uSdf in each of forward,
//   input backward and weight backward; attention core forward 4S^2 d
//   (fused: 4cS^2 d), its input backward 8S^2 d (fused: 10cS^2 d, the
//   kernel recomputing the scores); head forward 2SdV.
//   Defaults: block forward 8Sd^2 + 4S^2 d + 4Sdf; input backward 8Sd^2 +
//   4Sdf + 8S^2 d; weight backward 8Sd^2 + 4Sdf.
// Params of a block: d(d + 2kv) + d^2 + udf weights, biases (when `bias`)
// d + 2kv + (u - 1)f + 2d, norms 2 x 2d (layernorm) or 2 x d (rmsnorm);
// defaults 4d^2 + 2df + f + 9d (as GPT-2). Embedding Vd (+ Sd learned
// positions); head dV (untied) + V (bias) + the final norm.
// Stashed bytes of a block follow Korthikanti et al. 2022 (S d (34 + 5 h S / d)
// bytes at 16 bits), scaled to the dtype; swiglu keeps the gate's input too
// (+2f/d), fused attention keeps no scores (the 5 h S / d term goes) and
// keeps K and V unexpanded (-4(1 - g/h)); the unfused path expands K and V to
// the h heads its batched GEMMs read, and keeps those.
// With tensor parallelism t, per GPU: GEMMs, attention and FFN kernels and
// their weights divide by t (Megatron's column- then row-parallel pairs;
// norms, the output projection's and FFN-down's biases replicated; K and V
// heads divide by t too); a
// block adds 2 all-reduces of S d elements in forward (after the output
// projection and FFN-down) and 2 in backward (the input gradients of QKV and
// FFN-up); with sequence parallelism each becomes a reduce-scatter and an
// all-gather, and the norm, dropout and residual kernels divide by t.
// Stash per block (Korthikanti et al., Table 2): S d (10 + 24/t + 5 h S/(d t)),
// with sequence parallelism S d (34/t + 5 h S/(d t)) (the block's changes
// above divide by t); selective recompute
// drops the 5 h S/(d t) term and adds the attention core's forward to the
// input backward. The embedding and the head are vocabulary-parallel. The
// stage boundary each GPU sends is S d / t (Megatron's scatter-gather).
// Context parallelism c: every per-token figure above (GEMMs, kernels,
// activations, the boundary) takes S / c tokens; the attention core does
// 1/c of its FLOPs (Megatron's load-balanced causal split), in c kernels.
// MoE block (experts E > 1; r = top_k x capacity factor tokens per token,
// f_e each expert's width, n_s shared experts, u as above): the MLP's
// matmul FLOPs 2 u S d f become 2 S d E (router) + 2 u r S d f_e (experts)
// + 2 u S d n_s f_e (shared) in each of forward, input and weight backward;
// params d E + E u d f_e + u d n_s f_e (+ biases); the MLP's stash (16 of
// Korthikanti's units at f = 4d) becomes the experts' r (6 or 4) f_e / d and
// the shared experts' (6 or 4) n_s f_e / d (split by t), and the routed
// copies of the tokens in and out of the experts, 4 r, with the router's
// fp32 probabilities, 2 E / d (not split). Memory-bound: the permutation
// reads S d and writes r S d elements, the unpermutation and combine the
// reverse, each again in the backward.
// FP8 (dtype fp8): the four linears' GEMMs (QKV, output projection, FFN up
// and down) are FP8, each with Transformer Engine's cast-and-transpose of
// its input in the forward (read 2 bytes, write two 1-byte copies: 4 bytes
// an element) and of its output gradient in the backward; the weights' FP8
// copies are cast once a step (not modelled per micro-batch).
Model GenerateTransformer(const TransformerSpec& spec);

enum class Norm { kNone, kLayerNorm, kBatchNorm };

struct MlpSpec {
  int layers = 2;      // input layer + (layers - 2) hidden blocks + classifier head
  int width = 64;
  int input = 32;
  int classes = 8;
  Norm norm = Norm::kNone;
  bool residual = false;
  Dtype dtype = Dtype::kFp32;
};

// input linear (input -> width, relu); hidden blocks ([norm], linear width ->
// width, relu, [+ residual]); head (linear width -> classes, softmax
// cross-entropy). A linear n -> m costs 2nm FLOPs per sample in each of
// forward, input backward and weight backward.
Model GenerateMlp(const MlpSpec& spec);

struct CnnSpec {
  int layers = 8;        // convolutional blocks between stem and head
  int channels = 32;     // after the stem
  int image = 32;        // input height = width
  int in_channels = 3;
  int classes = 10;
  int reductions = 3;    // blocks that halve the spatial size and double channels
  Dtype dtype = Dtype::kFp32;
};

// stem (3x3 conv), `layers` blocks (3x3 conv + batchnorm + relu, plus the
// block's input when it keeps the shape; evenly spaced reduction blocks use
// stride 2 and double the channels), head (global average
// pool, linear to classes, softmax cross-entropy). A 3x3 conv from Ci to Co
// channels at output Ho x Wo costs 2 Ho Wo Ci Co 9 FLOPs per sample forward
// (and as much for each backward), so cost and activation size vary widely
// from layer to layer, as in ResNet or AmoebaNet.
Model GenerateCnn(const CnnSpec& spec);

// The convolutions of GenerateCnn, stem first: channels in and out, the
// input image side and the stride (2 for a reduction block). A 3x3
// convolution with padding 1 gives a side of (in - 1) / stride + 1.
struct CnnConv {
  int in_channels, out_channels, in_side, stride;
  int out_side() const { return (in_side - 1) / stride + 1; }
};
std::vector<CnnConv> CnnConvs(const CnnSpec& spec);

}  // namespace twinpipe::cost
