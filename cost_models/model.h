// A model as the cost models see it: a sequence of layers with per-sample
// FLOPs, parameters and bytes, plus the edges of a layer graph when the model
// is not a plain chain (skip connections).
//
//   Model m = GenerateTransformer({.layers = 24, .d_model = 1024, ...});
//   m.layers[1].fwd_flops  // FLOPs of one block's forward for one sample
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cost_models/catalogue.h"

namespace twinpipe::cost {

struct Layer {
  std::string name;
  std::string kind;               // "embedding", "transformer_block", "linear", "conv", ...
  double fwd_flops = 0;           // forward, per sample
  double bwd_input_flops = 0;     // input gradient, per sample
  double bwd_weight_flops = 0;    // weight gradient, per sample
  double params = 0;              // parameter count
  double out_bytes = 0;           // output activation, per sample
  double stash_bytes = 0;         // activations kept for backward without recompute, per sample
  std::optional<double> cost;     // the user's c_i: what the partitioner balances when given
};

struct Model {
  std::vector<Layer> layers;
  Dtype dtype = Dtype::kFp32;
  double input_bytes = 0;  // the model input, per sample (what stage 0 receives)
  // Edges (from, to) of a layer graph, in the layers' final (topological)
  // order; empty for a chain (layer i feeds layer i+1).
  std::vector<std::pair<int, int>> edges;
};

// Bytes per sample crossing the cut after layer j (between j and j+1), for
// j = 0..L-2: every tensor produced at or before j and consumed after it.
std::vector<double> CutBytes(const Model& model);

}  // namespace twinpipe::cost
