#include "execute/model.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "execute/layers/conv_block.h"
#include "execute/layers/embedding.h"
#include "execute/layers/pooling.h"
#include "execute/layers/gelu.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/transformer_block.h"
#include "execute/layers/relu.h"
#include "execute/layers/linear.h"
#include "execute/layers/residual_block.h"
#include "execute/layers/rmsnorm.h"
#include "execute/layers/sequential.h"

namespace twinpipe::execute {

Result<void> CheckExecutable(const cost::Config& c) {
  if (c.pipeline.tensor_parallel > 1 || c.pipeline.sequence_parallel) {
    return Fail(fmt::format("{}: /pipeline/tensor_parallel: tensor (and sequence) parallelism is planned and "
                            "simulated, not executed: execute runs pipeline and data parallelism (set "
                            "tensor_parallel to 1)", c.source));
  }
  if (c.pipeline.context_parallel > 1) {
    return Fail(fmt::format("{}: /pipeline/context_parallel: context parallelism is planned and simulated, not "
                            "executed: execute runs whole sequences on each device (set context_parallel to 1)",
                            c.source));
  }
  if (c.model.dtype == cost::Dtype::kFp8) {
    return Fail(fmt::format("{}: /model/dtype: FP8 training is planned and simulated, not executed: the executors "
                            "compute in fp32 (CPU) or TF32/BF16 (CUDA); use bf16 or fp32", c.source));
  }
  if (c.training.sharding != cost::DataParallelSharding::kNone) {
    return Fail(fmt::format("{}: /training/data_parallel_sharding: sharded data parallelism is planned and simulated, "
                            "not executed: execute's replicas all-reduce whole gradients (set it to none)",
                            c.source));
  }
  if (c.pipeline.checkpointing.granularity != cost::RecomputeGranularity::kCell &&
      ir::InsertsRecompute(c.pipeline.recompute)) {
    return Fail(fmt::format("{}: /pipeline/recompute_granularity: recompute per layer is planned and simulated, not "
                            "executed: the executors recompute a cell from its boundary (set it to cell)", c.source));
  }
  if (c.pipeline.recompute == ir::RecomputeMode::kSelective) {
    return Fail(fmt::format("{}: /pipeline/recompute: selective recompute is planned and simulated, not executed "
                            "(use none, full or except-last)", c.source));
  }
  if (c.transformer && c.transformer->experts > 0) {
    return Fail(fmt::format("{}: /model/experts: mixture-of-experts blocks are planned and simulated, not executed: "
                            "the executors have no router or experts (set experts to 0)", c.source));
  }
  if (c.transformer && c.transformer->Mla()) {
    return Fail(fmt::format("{}: /model/kv_lora_rank: multi-head latent attention is planned and simulated, not "
                            "executed: the executors' attention projects K and V from the input, not from a latent "
                            "(remove kv_lora_rank)", c.source));
  }
  if (c.transformer) {
    // Every block the generator builds runs (attention: fused computes the
    // unfused numbers); rotary positions turn pairs of a head's dimensions.
    const cost::TransformerSpec& t = *c.transformer;
    if (t.position == cost::PositionKind::kRope && (t.d_model / t.heads) % 2 != 0) {
      return Fail(fmt::format("{}: /model/position: rotary positions turn pairs of a head's dimensions, and "
                              "d_model / heads = {} is odd", c.source, t.d_model / t.heads));
    }
  }
  if (!c.mlp && !c.transformer && !c.cnn) {
    return Fail(fmt::format("{}: /model: the CPU backend runs the mlp, transformer and cnn generators, not an "
                            "explicit layer list", c.source));
  }
  return {};
}

namespace {

// embedding (token table; learned positions unless rotary), blocks, head
// (final norm and vocabulary projection, with a bias when the blocks have
// them). Tied: the head's projection is a copy of the embedding's token
// table (layer 0, seeded `embedding_seed`), the two summed at STEP.
std::unique_ptr<Layer> TransformerLayer(const cost::TransformerSpec& t, int i, uint64_t seed,
                                        uint64_t embedding_seed) {
  const bool rope = t.position == cost::PositionKind::kRope;
  if (i == 0) {
    auto embedding = std::make_unique<Embedding>(seed, t.vocab, t.seq, t.d_model, /*positions=*/!rope);
    if (t.tied_embeddings) embedding->TieTokens();
    return embedding;
  }
  if (i <= t.layers) return std::make_unique<TransformerBlock>(seed, t);
  auto head = std::make_unique<Sequential>();
  if (t.norm == cost::NormKind::kRmsNorm) {
    head->Add(std::make_unique<RmsNorm>(t.d_model));
  } else {
    head->Add(std::make_unique<LayerNorm>(t.d_model));
  }
  auto logits = std::make_unique<Linear>(seed, t.d_model, t.vocab, t.bias);
  if (t.tied_embeddings) {
    logits->TieWeight(Embedding::TokenTable(embedding_seed, t.vocab, t.d_model, Embedding::TiedBound(t.d_model)));
  }
  head->Add(std::move(logits));
  return head;
}

// stem and blocks (conv, batchnorm, relu, residual where the shape stays),
// head (global average pool and a linear classifier).
std::unique_ptr<Layer> CnnLayer(const cost::CnnSpec& s, int i, uint64_t seed) {
  const auto convs = cost::CnnConvs(s);
  if (i < static_cast<int>(convs.size())) {
    const cost::CnnConv& c = convs[i];
    return MakeConvBlock(seed, c.in_channels, c.out_channels, c.in_side, c.stride);
  }
  const cost::CnnConv& last = convs.back();
  auto head = std::make_unique<Sequential>();
  head->Add(std::make_unique<GlobalAvgPool>(last.out_channels, last.out_side() * last.out_side()));
  head->Add(std::make_unique<Linear>(seed, last.out_channels, s.classes));
  return head;
}

}  // namespace

int64_t ParameterCount(Layer& layer) {
  int64_t n = 0;
  for (const Param* p : layer.Params()) {
    if (p->tie != Tie::kCopy) n += static_cast<int64_t>(p->value.size());
  }
  return n;
}

std::vector<std::unique_ptr<Layer>> BuildLayers(const cost::Config& c, int first, int last) {
  std::vector<std::unique_ptr<Layer>> layers;
  auto seed_of = [&](int i) { return static_cast<uint64_t>(c.training.seed) * 1000003ULL + static_cast<uint64_t>(i); };
  for (int i = first; i <= last; ++i) {
    const uint64_t seed = seed_of(i);
    if (c.transformer) {
      layers.push_back(TransformerLayer(*c.transformer, i, seed, seed_of(0)));
      continue;
    }
    if (c.cnn) {
      layers.push_back(CnnLayer(*c.cnn, i, seed));
      continue;
    }
    const cost::MlpSpec& s = *c.mlp;
    if (i == 0) {
      auto input = std::make_unique<Sequential>();
      input->Add(std::make_unique<Linear>(seed, s.input, s.width));
      input->Add(std::make_unique<Relu>());
      layers.push_back(std::move(input));
    } else if (i + 1 < s.layers) {
      layers.push_back(std::make_unique<ResidualBlock>(seed, s.width, s.norm, s.residual));
    } else {
      layers.push_back(std::make_unique<Linear>(seed, s.width, s.classes));
    }
  }
  return layers;
}

SyntheticTask::SyntheticTask(const cost::Config& c)
    : input_(c.mlp ? c.mlp->input : c.cnn ? c.cnn->in_channels * c.cnn->image * c.cnn->image : c.transformer->seq),
      classes_(c.mlp ? c.mlp->classes : c.cnn ? c.cnn->classes : c.transformer->vocab),
      batch_(c.training.batch), seed_(static_cast<uint64_t>(c.training.seed)) {
  if (c.transformer) {
    sequences_ = true;
    reverse_ = !c.transformer->causal;
    labels_per_sample_ = c.transformer->seq;
    return;
  }
  if (c.cnn) pixels_ = c.cnn->image * c.cnn->image;  // the teacher sees each channel's mean
  const int features = input_ / pixels_;
  w1_ = InitUniform(seed_ ^ 0x7EAC4E5ULL, static_cast<size_t>(features) * hidden_,
                    1.5f * std::sqrt(float(pixels_)) / std::sqrt(float(features)));
  w2_ = InitUniform(seed_ ^ 0x5EC0DULL, static_cast<size_t>(hidden_) * classes_, 1.5f / std::sqrt(float(hidden_)));
}

SyntheticTask::Batch SyntheticTask::MakeSequences(int step) const {
  Batch b;
  const int S = input_;
  b.inputs.resize(static_cast<size_t>(batch_) * S);
  b.labels.resize(static_cast<size_t>(batch_) * S);
  std::mt19937_64 rng(seed_ * 7919ULL + static_cast<uint64_t>(step));
  std::uniform_int_distribution<int> token(0, classes_ - 1);
  for (int64_t r = 0; r < batch_; ++r) {
    float* x = &b.inputs[static_cast<size_t>(r) * S];
    for (int t = 0; t < S; ++t) x[t] = static_cast<float>(token(rng));
    for (int t = 0; t < S; ++t) b.labels[static_cast<size_t>(r) * S + t] = static_cast<int>(x[reverse_ ? S - 1 - t : t]);
  }
  return b;
}

SyntheticTask::Batch SyntheticTask::Make(int step) const {
  if (sequences_) return MakeSequences(step);
  Batch b;
  b.inputs.resize(static_cast<size_t>(batch_) * input_);
  b.labels.resize(batch_);
  std::mt19937_64 rng(seed_ * 7919ULL + static_cast<uint64_t>(step));
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& x : b.inputs) x = normal(rng);
  std::vector<float> h(hidden_), x(input_ / pixels_);
  for (int64_t r = 0; r < batch_; ++r) {
    const float* sample = &b.inputs[static_cast<size_t>(r) * input_];
    for (size_t i = 0; i < x.size(); ++i) {
      double mean = 0;
      for (int p = 0; p < pixels_; ++p) mean += sample[i * pixels_ + p];
      x[i] = static_cast<float>(mean / pixels_);
    }
    for (int j = 0; j < hidden_; ++j) {
      float a = 0;
      for (size_t i = 0; i < x.size(); ++i) a += x[i] * w1_[i * hidden_ + j];
      h[j] = std::tanh(a);
    }
    int best = 0;
    float best_v = -INFINITY;
    for (int k = 0; k < classes_; ++k) {
      float v = 0;
      for (int j = 0; j < hidden_; ++j) v += h[j] * w2_[static_cast<size_t>(j) * classes_ + k];
      if (v > best_v) {
        best_v = v;
        best = k;
      }
    }
    b.labels[r] = best;
  }
  return b;
}

}  // namespace twinpipe::execute
