// Model generators: transformer, MLP and CNN stacks with per-layer FLOPs,
// parameters and bytes per sample, in closed form (see each function).
//
//   Model m = GenerateTransformer({.layers = 24, .d_model = 1024, .ffn = 4096,
//                                  .heads = 16, .seq = 512, .vocab = 32000});
#pragma once

#include <string>
#include <vector>

#include "cost_models/model.h"

namespace twinpipe::cost {

struct TransformerSpec {
  int layers = 1;       // transformer blocks
  int d_model = 64;
  int ffn = 256;
  int heads = 4;
  int seq = 16;
  int vocab = 100;
  bool causal = false;  // attention sees only earlier tokens (same FLOPs: the full S x S scores are computed)
  Dtype dtype = Dtype::kFp32;
  // Megatron-LM's tensor parallelism (set from the config's pipeline
  // section): each layer describes one GPU of a group of t, which holds 1/t
  // of the weights and GEMMs; sequence parallelism also shards the
  // layernorms, dropouts and residuals along the sequence; selective
  // recompute keeps no attention scores and re-runs the attention core in
  // the backward.
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  bool selective_recompute = false;
};

// embedding (tokens + positions), `layers` pre-LayerNorm blocks, output head
// (final LayerNorm, vocabulary projection, softmax cross-entropy). Per sample
// (S = seq, d = d_model, f = ffn, V = vocab), matmul FLOPs:
//   block forward 8Sd^2 + 4S^2 d + 4Sdf; input backward 8Sd^2 + 4Sdf + 8S^2 d;
//   weight backward 8Sd^2 + 4Sdf; params 4d^2 + 2df + f + 9d (as GPT-2);
//   head forward 2SdV, params dV + V + 2d.
// Stashed bytes of a block follow Korthikanti et al. 2022 (S d (34 + 5 h S / d)
// bytes at 16 bits), scaled to the dtype.
// With tensor parallelism t, per GPU: GEMMs, attention and FFN kernels and
// their weights divide by t (Megatron's column- then row-parallel pairs;
// layernorms, the output projection's and FFN-down's biases replicated); a
// block adds 2 all-reduces of S d elements in forward (after the output
// projection and FFN-down) and 2 in backward (the input gradients of QKV and
// FFN-up); with sequence parallelism each becomes a reduce-scatter and an
// all-gather, and the layernorm, dropout and residual kernels divide by t.
// Stash per block (Korthikanti et al., Table 2): S d (10 + 24/t + 5 h S/(d t)),
// with sequence parallelism S d (34/t + 5 h S/(d t)); selective recompute
// drops the 5 h S/(d t) term and adds the attention core's forward to the
// input backward. The embedding and the head are vocabulary-parallel. The
// stage boundary each GPU sends is S d / t (Megatron's scatter-gather).
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
