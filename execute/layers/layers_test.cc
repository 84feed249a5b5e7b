// Each layer's backward against central finite differences of a scalar
// objective L = sum(y * w) with a fixed random w, in double-checked fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "execute/layers/attention.h"
#include "execute/layers/batchnorm2d.h"
#include "execute/layers/conv2d.h"
#include "execute/layers/conv_block.h"
#include "execute/layers/pooling.h"
#include "execute/layers/embedding.h"
#include "execute/layers/gelu.h"
#include "execute/layers/transformer_block.h"
#include "execute/layers/random_tensor.h"
#include "execute/layers/relu.h"
#include "execute/layers/linear.h"
#include "execute/layers/batchnorm.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/residual_block.h"
#include "execute/layers/softmax_cross_entropy.h"

namespace twinpipe::execute {
namespace {

constexpr auto Random = RandomNormal;

double Objective(Layer& layer, const Tensor& x, const Tensor& w) {
  Saved saved;
  Tensor y = layer.Forward(x, saved, Mode::kRecompute);  // no statistics updates while probing
  double s = 0;
  for (int i = 0; i < y.rows() * y.cols(); ++i) s += static_cast<double>(y.data()[i]) * w.data()[i];
  return s;
}

// Checks dL/dx and dL/dparam against finite differences, from Backward and
// from the zero-bubble split (BackwardInput, then BackwardWeight).
void CheckGradients(Layer& layer, int rows, int in, int out, double tol = 2e-2, float h = 1e-2f) {
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "BackwardInput + BackwardWeight" : "Backward");
  MemoryAccount account;
  Tensor x = Random(&account, rows, in, 1);
  Tensor w = Random(&account, rows, out, 2);
  for (Param* p : layer.Params()) std::fill(p->grad.begin(), p->grad.end(), 0.0);
  Saved saved;
  layer.Forward(x, saved, Mode::kRecompute);
  Tensor dx;
  if (split) {
    dx = layer.BackwardInput(w, saved);
    layer.BackwardWeight(saved);
  } else {
    dx = layer.Backward(w, saved);
  }

  auto check = [&](float& v, double analytic, const std::string& what) {
    const float keep = v;
    v = keep + h;
    const double up = Objective(layer, x, w);
    v = keep - h;
    const double down = Objective(layer, x, w);
    v = keep;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic, numeric, tol * std::max(1.0, std::abs(numeric))) << layer.Name() << " " << what;
  };
  for (int i = 0; i < rows * in; ++i) check(x.data()[i], dx.data()[i], "dx[" + std::to_string(i) + "]");
  for (Param* p : layer.Params()) {
    for (size_t i = 0; i < p->value.size(); ++i) check(p->value[i], p->grad[i], p->name + "[" + std::to_string(i) + "]");
  }
  }
}

TEST(Layers, LinearMatchesFiniteDifferences) {
  Linear l(7, 5, 3);
  CheckGradients(l, 4, 5, 3);
}

TEST(Layers, ReluMatchesFiniteDifferences) {
  Relu l;
  CheckGradients(l, 4, 6, 6);
}

TEST(Layers, GeluMatchesFiniteDifferences) {
  Gelu l;
  CheckGradients(l, 4, 6, 6);
}

// GELU's tanh is computed without libm: its forward and backward agree with
// the formula over std::tanh to float rounding, from tiny to saturated inputs.
TEST(Layers, GeluAgreesWithLibmTanh) {
  std::vector<float> v;
  for (float x = -30.f; x <= 30.f; x += 0.00731f) v.push_back(x);
  for (float x : {0.f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 1e-3f, 100.f, -100.f, 1e6f, -1e6f}) v.push_back(x);
  const int n = static_cast<int>(v.size());
  Tensor x(nullptr, n, 1), dy(nullptr, n, 1);
  for (int i = 0; i < n; ++i) x.data()[i] = v[i], dy.data()[i] = 1.f;
  Gelu g;
  Saved saved;
  const Tensor y = g.Forward(x, saved, Mode::kTrain);
  const Tensor dx = g.Backward(dy, saved);
  double worst_y = 0, worst_dx = 0;
  for (int i = 0; i < n; ++i) {
    const double a = v[i], u = 0.7978845608028654 * (a + 0.044715 * a * a * a), t = std::tanh(u);
    const double ey = 0.5 * a * (1 + t);
    const double edx = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * a * a);
    worst_y = std::max(worst_y, std::abs(y.data()[i] - ey) / std::max(1.0, std::abs(a)));
    worst_dx = std::max(worst_dx, std::abs(dx.data()[i] - edx) / std::max(1.0, std::abs(edx)));
  }
  EXPECT_LT(worst_y, 5e-7);
  EXPECT_LT(worst_dx, 5e-6);
}

TEST(Layers, LayerNormMatchesFiniteDifferences) {
  LayerNorm l(6);
  CheckGradients(l, 3, 6, 6);
}

TEST(Layers, BatchNormMatchesFiniteDifferences) {
  BatchNorm l(4);
  CheckGradients(l, 5, 4, 4);
}

TEST(Layers, ResidualBlocksMatchFiniteDifferences) {
  for (auto norm : {cost::Norm::kNone, cost::Norm::kLayerNorm, cost::Norm::kBatchNorm}) {
    for (bool residual : {false, true}) {
      ResidualBlock b(3, 5, norm, residual);
      CheckGradients(b, 4, 5, 5);
    }
  }
}

TEST(Layers, SelfAttentionMatchesFiniteDifferences) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    SelfAttention a(5, /*d=*/6, /*heads=*/2, /*seq=*/3, causal);
    CheckGradients(a, /*rows=*/2 * 3, 6, 6);
  }
}

TEST(Layers, TransformerBlockMatchesFiniteDifferences) {
  TransformerBlock b(9, /*d=*/4, /*ffn=*/8, /*heads=*/2, /*seq=*/3, /*causal=*/true);
  CheckGradients(b, /*rows=*/2 * 3, 4, 4);
}

TEST(Layers, EmbeddingTablesMatchFiniteDifferences) {
  // Token ids have no gradient; the tables' (token and position) do.
  Embedding e(3, /*vocab=*/5, /*seq=*/3, /*d=*/2);
  MemoryAccount account;
  Tensor ids(&account, 2, 3);
  const float tokens[] = {0, 4, 4, 2, 1, 4};
  std::copy(std::begin(tokens), std::end(tokens), ids.data());
  Tensor w = Random(&account, 6, 2, 2);
  for (bool split : {false, true}) {
    for (Param* p : e.Params()) std::fill(p->grad.begin(), p->grad.end(), 0.0);
    Saved saved;
    e.Forward(ids, saved, Mode::kTrain);
    if (split) {
      EXPECT_TRUE(e.BackwardInput(w, saved).empty());
      e.BackwardWeight(saved);
    } else {
      EXPECT_TRUE(e.Backward(w, saved).empty());
    }
    for (Param* p : e.Params()) {
      for (size_t i = 0; i < p->value.size(); ++i) {
        const float keep = p->value[i];
        p->value[i] = keep + 1e-2f;
        const double up = Objective(e, ids, w);
        p->value[i] = keep - 1e-2f;
        const double down = Objective(e, ids, w);
        p->value[i] = keep;
        EXPECT_NEAR(p->grad[i], (up - down) / 2e-2, 1e-3) << p->name << "[" << i << "]";
      }
    }
  }
}

TEST(Layers, Conv2dMatchesFiniteDifferences) {
  for (int stride : {1, 2}) {
    SCOPED_TRACE(stride);
    Conv2d conv(4, /*in=*/2, /*out=*/3, /*image=*/5, stride);
    const int out = conv.out_image();
    CheckGradients(conv, 2, 2 * 5 * 5, 3 * out * out);
  }
}

TEST(Layers, BatchNorm2dMatchesFiniteDifferences) {
  BatchNorm2d bn(/*channels=*/3, /*pixels=*/4);
  CheckGradients(bn, 2, 3 * 4, 3 * 4);
}

TEST(Layers, GlobalAvgPoolMatchesFiniteDifferences) {
  GlobalAvgPool pool(/*channels=*/3, /*pixels=*/4);
  CheckGradients(pool, 2, 3 * 4, 3);
}

TEST(Layers, ConvBlocksMatchFiniteDifferences) {
  // Batchnorm's normalisation magnifies a probe of the weights, so a smaller
  // step keeps the central difference off ReLU's kink.
  auto keep = MakeConvBlock(6, 2, 2, 4, 1);
  EXPECT_EQ(keep->Name(), "residual_conv_block");
  CheckGradients(*keep, 3, 2 * 16, 2 * 16, 2e-2, 1e-3f);
  auto reduce = MakeConvBlock(7, 2, 4, 4, 2);
  EXPECT_EQ(reduce->Name(), "conv_block");
  CheckGradients(*reduce, 3, 2 * 16, 4 * 4, 2e-2, 1e-3f);
}

TEST(Layers, SoftmaxCrossEntropyMatchesFiniteDifferences) {
  MemoryAccount account;
  Tensor logits = Random(&account, 3, 4, 5);
  const std::vector<int> labels = {1, 3, 0};
  double loss = 0;
  Tensor grad = SoftmaxCrossEntropy(logits, labels, 6.0, loss);
  const float h = 1e-2f;

  for (int i = 0; i < 12; ++i) {
    const float keep = logits.data()[i];
    double up = 0, down = 0;
    logits.data()[i] = keep + h;
    SoftmaxCrossEntropy(logits, labels, 6.0, up);
    logits.data()[i] = keep - h;
    SoftmaxCrossEntropy(logits, labels, 6.0, down);
    logits.data()[i] = keep;
    EXPECT_NEAR(grad.data()[i], (up - down) / (2 * h) / 6.0, 1e-3);
  }
}

TEST(BatchNorm, MicroBatchStatisticsInTrainingMiniBatchStatisticsForEvaluation) {
  MemoryAccount account;
  BatchNorm bn(3, /*momentum=*/0.5f);
  Tensor a = Random(&account, 4, 3, 11), b = Random(&account, 6, 3, 12);
  Saved sa, sb;
  Tensor ya = bn.Forward(a, sa, Mode::kTrain);
  bn.Forward(b, sb, Mode::kTrain);
  bn.Forward(b, sb, Mode::kRecompute);  // a recompute does not count twice
  // Training output normalises with micro-batch a's own statistics.
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int r = 0; r < 4; ++r) mean += a.at(r, c);
    mean /= 4;
    for (int r = 0; r < 4; ++r) var += (a.at(r, c) - mean) * (a.at(r, c) - mean);
    var /= 4;
    for (int r = 0; r < 4; ++r) EXPECT_NEAR(ya.at(r, c), (a.at(r, c) - mean) / std::sqrt(var + 1e-5), 1e-5);
  }
  bn.EndStep();
  // Running statistics: from all 10 rows of the mini-batch, unbiased variance.
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int r = 0; r < 4; ++r) mean += a.at(r, c);
    for (int r = 0; r < 6; ++r) mean += b.at(r, c);
    mean /= 10;
    for (int r = 0; r < 4; ++r) var += (a.at(r, c) - mean) * (a.at(r, c) - mean);
    for (int r = 0; r < 6; ++r) var += (b.at(r, c) - mean) * (b.at(r, c) - mean);
    var /= 9;
    EXPECT_NEAR(bn.running_mean()[c], 0.5 * 0 + 0.5 * mean, 1e-6);
    EXPECT_NEAR(bn.running_var()[c], 0.5 * 1 + 0.5 * var, 1e-5);
  }
  Saved none;
  Tensor y = bn.Forward(a, none, Mode::kEval);
  EXPECT_NEAR(y.at(0, 0), (a.at(0, 0) - bn.running_mean()[0]) / std::sqrt(bn.running_var()[0] + 1e-5), 1e-5);
}

TEST(Tensor, AccountsItsBytes) {
  MemoryAccount account;
  {
    Tensor t(&account, 4, 8);
    EXPECT_EQ(account.bytes(), 128);
    Tensor u = t;
    EXPECT_EQ(account.bytes(), 256);
    Tensor v = std::move(u);
    EXPECT_EQ(account.bytes(), 256);
  }
  EXPECT_EQ(account.bytes(), 0);
  EXPECT_EQ(account.peak_bytes(), 256);
}

}  // namespace
}  // namespace twinpipe::execute
