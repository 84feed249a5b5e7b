#include "execute/layers/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace twinpipe::execute {

Tensor SoftmaxCrossEntropy(const Tensor& logits, const std::vector<int>& labels, double normaliser, double& loss_sum) {
  const int B = logits.rows(), C = logits.cols();
  auto grad = Tensor::Uninitialized(logits.account(), B, C);
  loss_sum = 0;
  std::vector<double> e(C);  // exp(logit - top): each exponential once, its probability e / z
  for (int r = 0; r < B; ++r) {
    double top = logits.at(r, 0);
    for (int c = 1; c < C; ++c) top = std::max(top, static_cast<double>(logits.at(r, c)));
    double z = 0;
    for (int c = 0; c < C; ++c) z += (e[c] = std::exp(logits.at(r, c) - top));
    const double log_z = std::log(z) + top;
    loss_sum += log_z - logits.at(r, labels[r]);
    for (int c = 0; c < C; ++c) {
      grad.at(r, c) = static_cast<float>((e[c] / z - (c == labels[r] ? 1.0 : 0.0)) / normaliser);
    }
  }
  return grad;
}

}  // namespace twinpipe::execute
