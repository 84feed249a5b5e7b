// Softmax cross-entropy over each row's logits on the GPU: returns the
// logits' gradient divided by `normaliser` and adds the summed loss of the
// rows to *loss_sum (a double in device memory, read at the end of a step).
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

DeviceTensor SoftmaxCrossEntropy(const Context& ctx, const DeviceTensor& logits, const int* labels, double normaliser,
                                 double* loss_sum);

}  // namespace twinpipe::execute::cuda
