// Softmax cross-entropy over class logits (B, classes) with integer labels:
// the loss of the last stage. The gradient is scaled by 1 / `normaliser`
// (the mini-batch size) so that micro-batch gradients sum to the mini-batch
// mean's.
//
//   double loss_sum;  Tensor dlogits = SoftmaxCrossEntropy(logits, labels, 128, loss_sum);
#pragma once

#include <vector>

#include "execute/tensor.h"

namespace twinpipe::execute {

// Returns d(sum of losses / normaliser)/d logits; `loss_sum` is the sum of
// the rows' losses (not divided).
Tensor SoftmaxCrossEntropy(const Tensor& logits, const std::vector<int>& labels, double normaliser, double& loss_sum);

}  // namespace twinpipe::execute
