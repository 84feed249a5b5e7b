// Executable models: the layers of a config's generator, built for the cells
// a partition gives, each layer seeded by its index so that every partition
// starts from the same weights. And the synthetic task they learn.
//
//   auto layers = BuildLayers(config, /*first=*/0, /*last=*/3);
//   SyntheticTask task(config);  auto batch = task.Batch(step);
#pragma once

#include <memory>
#include <vector>

#include "cost_models/config.h"
#include "execute/layers/layer.h"
#include "ir/result.h"

namespace twinpipe::execute {

// Fails (bad input), naming the config's JSON path, for what the executors
// do not run: tensor and sequence parallelism, selective recompute, explicit
// layer lists, rotary positions over odd head widths.
Result<void> CheckExecutable(const cost::Config& config);

// Layers first..last (inclusive) of the config's model.
std::vector<std::unique_ptr<Layer>> BuildLayers(const cost::Config& config, int first, int last);

// The layer's parameters as the cost model counts them: a tied copy (the
// head's of the token table, layer.h's Tie) is the embedding's, not its own.
int64_t ParameterCount(Layer& layer);

// Seeded, deterministic, learnable tasks. mlp and cnn: a fixed random
// teacher network (input -> 32 tanh units -> classes, argmax) labels random
// normal inputs (for the cnn, images of in_channels x image x image whose
// channel means the teacher reads). transformer: sequence reversal, label of token t = input token
// S-1-t (copy when causal, since a causal model cannot see later tokens).
class SyntheticTask {
 public:
  explicit SyntheticTask(const cost::Config& config);
  struct Batch {
    std::vector<float> inputs;  // (N, input_cols) row-major; token ids as floats for a transformer
    std::vector<int> labels;    // (N, labels_per_sample)
  };
  Batch Make(int step) const;
  int input_cols() const { return input_; }
  int labels_per_sample() const { return labels_per_sample_; }

 private:
  Batch MakeSequences(int step) const;
  bool sequences_ = false, reverse_ = true;
  int labels_per_sample_ = 1;
  int pixels_ = 1;  // values the teacher averages into one feature (an image channel's)
  int input_, classes_, hidden_ = 32;
  int64_t batch_;
  uint64_t seed_;
  std::vector<float> w1_, w2_;
};

}  // namespace twinpipe::execute
