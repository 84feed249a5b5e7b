// What a self-attention layer is (both backends' SelfAttention): width,
// query heads, K/V heads, tokens per sample, the mask, rotary positions and
// biases. Plain C++17, for the CUDA twin's translation units too.
//
//   AttentionShape s{.d = 256, .heads = 8, .kv_heads = 2, .seq = 128, .causal = true, .rope = true};
//   s.kv() == 2;  s.head_dim() == 32;
#pragma once

namespace twinpipe::execute {

struct AttentionShape {
  int d = 0, heads = 1;
  int kv_heads = 0;  // 0: heads (multi-head attention); 1: multi-query
  int seq = 1;
  bool causal = false;
  bool rope = false;  // rotary positions on Q and K
  bool bias = true;   // on both projections
  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int head_dim() const { return d / heads; }
};

}  // namespace twinpipe::execute
