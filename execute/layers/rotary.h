// Rotary position embedding (RoPE, Su et al. 2021) on attention heads, in
// the half-split pairing of Llama / Hugging Face's `rotate_half`: within a
// head of dh columns, column i pairs with column i + dh/2 (i < dh/2), and the
// pair turns by the angle pos theta^(-2i/dh), pos the token's index in its
// sequence (row mod seq) and theta = 10000:
//   x'_i = x_i cos - x_{i+dh/2} sin,   x'_{i+dh/2} = x_{i+dh/2} cos + x_i sin.
// The inverse turns back (the transpose): the gradient's way.
//
//   Rotary rope(/*seq=*/128, /*head_dim=*/64);
//   rope.Apply(qkv, /*first_column=*/0, /*heads=*/8, /*inverse=*/false);   // Q's heads
#pragma once

#include <vector>

#include "execute/tensor.h"

namespace twinpipe::execute {

class Rotary {
 public:
  Rotary(int seq, int head_dim, double theta = 10000.0);
  // Turns `heads` heads of head_dim columns, from column `first` on, of
  // every row of x (B*seq rows), in place.
  void Apply(Tensor& x, int first, int heads, bool inverse) const;
  int seq() const { return seq_; }
  int head_dim() const { return dh_; }
  // (seq, head_dim / 2) row-major: cos and sin of each position's angles
  // (computed in double, rounded once), for the CUDA twin to use as they are.
  const std::vector<float>& cos() const { return cos_; }
  const std::vector<float>& sin() const { return sin_; }

 private:
  int seq_, dh_;
  std::vector<float> cos_, sin_;
};

}  // namespace twinpipe::execute
