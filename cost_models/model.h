// A model as the cost models see it: a sequence of layers with per-sample
// FLOPs, parameters and bytes, plus the edges of a layer graph when the model
// is not a plain chain (skip connections).
//
//   Model m = GenerateTransformer({.layers = 24, .d_model = 1024, ...});
//   m.layers[1].fwd_flops  // FLOPs of one block's forward for one sample
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cost_models/catalogue.h"

namespace twinpipe::cost {

// Framework ops one modelled kernel stands for when it is issued from eager
// framework code (Megatron-LM's PyTorch): a GEMM with its bias, reshapes and
// casts, an elementwise kernel with its allocation and dispatch. An estimate;
// calibration fits the host time per framework op it multiplies.
inline constexpr double kOpsPerKernel = 4;

// One GPU kernel of a layer's op, per sample (a micro-batch of b samples
// multiplies the dimension `scaled`, or the bytes). A GEMM computes `batch`
// products of (m x k) by (k x n); a memory-bound kernel (norm, softmax,
// elementwise) moves `bytes` through device memory; a tensor-parallel
// collective reduces or gathers a tensor of `bytes` over a group of `group`
// GPUs on the intra-node link (a ring, as NCCL runs it).
struct Kernel {
  enum class Pass : uint8_t { kForward, kInput, kWeight };  // F (and R), I, W
  enum class Scaled : uint8_t { kM, kN, kK, kBatch };       // the dimension the micro-batch multiplies
  enum class Collective : uint8_t { kNone, kAllReduce, kReduceScatter, kAllGather, kAllToAll };
  Pass pass = Pass::kForward;
  bool gemm = true;
  Collective collective = Collective::kNone;  // set: a collective (gemm false)
  double group = 1;
  double m = 0, n = 0, k = 0, batch = 1;  // GEMM shape, per sample along `scaled`
  Scaled scaled = Scaled::kM;
  double bytes = 0;                       // memory-bound kernel: bytes read and written, per sample
  // A kernel that runs for some micro-batch sizes only: Megatron's fused
  // scale-mask-softmax takes a micro-batch of b samples when b x `batch`
  // (its heads on this GPU) is a whole multiple of `quantum`; PyTorch's
  // softmax, another set of kernels, runs when it is not (see RunsFor).
  enum class Variant : uint8_t { kAlways, kFused, kUnfused };
  Variant variant = Variant::kAlways;
  double quantum = 0;
  // Kernels this entry stands for: several small memory-bound kernels of one
  // kind (`bytes` is their total), each issued on its own.
  double launches = 1;
  // Framework ops each launch is issued by (its host time: one kernel launch
  // and this many framework ops; its GPU floor: this many gaps): eager code's
  // kOpsPerKernel, or 1 for a kernel a fused framework op issues from its own
  // C++ (Transformer Engine's FP8 casts and transposes, one call each).
  double framework_ops = kOpsPerKernel;
  std::string name;  // "qkv", "softmax", ... for reports
  // A GEMM Transformer Engine runs with FP8 operands when the model's
  // precision is fp8 (the blocks' linear layers; not attention, not the
  // vocabulary projection).
  bool fp8 = false;
  // A weight-gradient GEMM (pass kWeight) adds its result into the gradient
  // kept across the micro-batches: that gradient's bytes an element
  // (/training/gradient_dtype, which the generator sets); 0: the model
  // precision's default, GradientAccumulationBytes(dtype).
  double accumulate_bytes = 0;
  // The GPUs a collective runs over (its `group` of them): the tensor-
  // parallel group inside a node, the context-parallel group (the ring that
  // passes K and V), or the data-parallel group.
  enum class Over : uint8_t { kTensor, kContext, kData, kExpert };
  Over over = Over::kTensor;
  // `bytes` is per micro-batch, not per sample (a gathered layer's weights).
  bool fixed_bytes = false;
  // A collective that runs beside compute instead of in series with it
  // (Transformer Engine's userbuffers, the context-parallel ring, FSDP's
  // prefetch): the index in its layer's kernel list of the GEMM it hides
  // behind, or kBesideOp for all of its op's compute; kInSeries (-1): none.
  // `exposed` is the share of it that shows anyway (the first chunk of a
  // split all-gather, the last of a reduce-scatter).
  static constexpr int32_t kInSeries = -1, kBesideOp = -2;
  int32_t overlaps = kInSeries;
  double exposed = 0;
  // A GEMM whose m x n outputs never leave the SM (a flash-attention
  // kernel's scores, consumed in place): no epilogue store after its math
  // (Device::epilogue_store).
  bool output_on_chip = false;

  double Flops() const { return gemm ? 2 * m * n * k * batch : 0; }  // per sample
};

// Whether the kernel runs for a micro-batch of `samples` (its variant's rule).
bool RunsFor(const Kernel& kernel, double samples);

// A GEMM's shape for a micro-batch of `samples`: its per-sample shape with
// the dimension `scaled` multiplied by them (what the kernel computes).
struct GemmShape {
  double m = 0, n = 0, k = 0, batch = 1;
};
inline GemmShape ShapeFor(const Kernel& kn, double samples) {
  GemmShape s{kn.m, kn.n, kn.k, kn.batch};
  switch (kn.scaled) {
    case Kernel::Scaled::kM: s.m *= samples; break;
    case Kernel::Scaled::kN: s.n *= samples; break;
    case Kernel::Scaled::kK: s.k *= samples; break;
    case Kernel::Scaled::kBatch: s.batch *= samples; break;
  }
  return s;
}

// A layer's kernels: a read-only list that the layers generated alike share,
// so that copying a model copies pointers and comparing two such layers'
// kernels is one comparison.
//
//   Kernels k = std::vector<Kernel>{...};   Layer b = a;   b.kernels.SharedWith(a.kernels)  // true
class Kernels {
 public:
  Kernels() = default;
  Kernels(std::vector<Kernel> kernels)  // NOLINT: implicit, as the vector it holds
      : list_(std::make_shared<const std::vector<Kernel>>(std::move(kernels))) {}
  Kernels(std::initializer_list<Kernel> kernels) : Kernels(std::vector<Kernel>(kernels)) {}

  bool empty() const { return !list_ || list_->empty(); }
  size_t size() const { return list_ ? list_->size() : 0; }
  const Kernel* begin() const { return list_ ? list_->data() : nullptr; }
  const Kernel* end() const { return list_ ? list_->data() + list_->size() : nullptr; }
  bool SharedWith(const Kernels& other) const { return list_ == other.list_; }

 private:
  std::shared_ptr<const std::vector<Kernel>> list_;
};

struct Layer {
  std::string name;
  std::string kind;               // "embedding", "transformer_block", "linear", "conv", ...
  double fwd_flops = 0;           // forward, per sample
  double bwd_input_flops = 0;     // input gradient, per sample
  double bwd_weight_flops = 0;    // weight gradient, per sample
  double params = 0;              // parameter count
  double expert_params = 0;       // of which an MoE block's experts on this GPU (their data-parallel group is
                                  // the expert data-parallel one: 1/e of the other weights')
  double out_bytes = 0;           // output activation, per sample
  double stash_bytes = 0;         // activations kept for backward without recompute, per sample
  std::optional<double> cost;     // the user's c_i: what the partitioner balances when given
  // Re-run by a recompute (R) op. Megatron-style activation checkpointing
  // wraps the transformer blocks only: a head keeps its activations, so R
  // stops before it (see RematerializedEnd).
  bool rematerialized = true;
  // GPUs of the layer's tensor-parallel group that each hold its whole
  // input, where a pipeline transfer carries 1/input_replicas of it per GPU
  // (the cut, CutBytes): t for a transformer block without sequence
  // parallelism (Megatron scatters the boundary and all-gathers it), 1
  // otherwise. A per-layer checkpoint keeps input_replicas x the cut before
  // the layer, or the cut alone when the saved activations are distributed
  // over the group (cost::Checkpointing).
  double input_replicas = 1;
  // The layer costed as its kernels (generated transformers); empty: the
  // FLOPs and bytes above with the roofline.
  Kernels kernels;
  // Weights the layer uses but another layer (`shares_weights_of`, an index
  // into the model's layers) holds: tied embeddings' output projection,
  // which reads the token embedding's table. On the same device they are
  // held once; on another, Megatron keeps a copy there (its gradient, its
  // optimizer state) and all-reduces the two copies' gradients between
  // the two devices before the optimizer steps (SharedWeightCopies).
  int shares_weights_of = -1;
  double shared_params = 0;
};

// The two layers cost the same (all but the names and the user's c_i agree):
// a model's identical blocks are timed once.
bool SameCosts(const Layer& a, const Layer& b);

// Whether a device holding layers `first`..`last` keeps a copy of weights
// that layer `layer` shares with layer `of` (Layer::shares_weights_of; -1:
// none): the layer is on it and the holder is not.
inline bool HoldsSharedCopy(int layer, int of, int first, int last) {
  return of >= 0 && layer >= first && layer <= last && (of < first || of > last);
}

// The parameters of copies that a device holding layers `first`..`last`
// keeps of weights shared with a layer outside them (Layer::shared_params).
double SharedWeightCopies(const std::vector<Layer>& layers, int first, int last);

struct Model {
  std::vector<Layer> layers;
  Dtype dtype = Dtype::kFp32;
  double input_bytes = 0;  // the model input, per sample (what stage 0 receives)
  // Edges (from, to) of a layer graph, in the layers' final (topological)
  // order; empty for a chain (layer i feeds layer i+1).
  std::vector<std::pair<int, int>> edges;
};

// Calls visit(i, time(i)) for each layer i of [first, last], evaluating
// time(i) once per run of consecutive layers with the same costs (a
// transformer's identical blocks) and repeating it for the rest of the run:
// the one place that rule lives (the partitioner's layer times, the
// simulator's op times, a cell's description).
template <typename Time, typename Visit>
void ForEachLayerTime(const Model& m, int first, int last, Time&& time, Visit&& visit) {
  decltype(time(first)) t{};  // seconds, or an array of them
  for (int i = first; i <= last; ++i) {
    if (i == first || !SameCosts(m.layers[i], m.layers[i - 1])) t = time(i);
    visit(i, t);
  }
}

// One past the last layer of [first, last] that a recompute re-runs: R runs
// [first, end), and layers [end, last] keep their activations from F.
int RematerializedEnd(const Model& model, int first, int last);

// Bytes per sample crossing the cut after layer j (between j and j+1), for
// j = 0..L-2: every tensor produced at or before j and consumed after it.
std::vector<double> CutBytes(const Model& model);

}  // namespace twinpipe::cost
