// Each layer's backward against central finite differences of a scalar
// objective L = sum(y * w) with a fixed random w, in double-checked fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <thread>

#include <fmt/format.h>

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
#include "execute/layers/rmsnorm.h"
#include "execute/layers/rotary.h"
#include "execute/layers/sequential.h"
#include "execute/layers/softmax_cross_entropy.h"
#include "execute/layers/squared_relu.h"
#include "execute/layers/swiglu.h"
#include "execute/tied.h"

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

TEST(Layers, LinearWithoutBiasMatchesFiniteDifferences) {
  Linear l(7, 5, 3, /*bias=*/false);
  ASSERT_EQ(l.Params().size(), 1u);
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

TEST(Layers, RmsNormMatchesFiniteDifferences) {
  RmsNorm l(6);
  Param& gain = *l.Params().at(0);
  for (size_t i = 0; i < gain.value.size(); ++i) gain.value[i] = 0.5f + 0.25f * static_cast<float>(i);  // not all 1
  CheckGradients(l, 3, 6, 6);
}

// y = x / sqrt(mean(x^2) + eps) * g, row by row, against the formula in double.
TEST(Layers, RmsNormIsTheFormula) {
  MemoryAccount account;
  RmsNorm l(5, 1e-5f);
  Param& gain = *l.Params().at(0);
  for (size_t i = 0; i < gain.value.size(); ++i) gain.value[i] = 1.f + 0.1f * static_cast<float>(i);
  const Tensor x = Random(&account, 3, 5, 4);
  Saved saved;
  const Tensor y = l.Forward(x, saved, Mode::kTrain);
  for (int r = 0; r < 3; ++r) {
    double square = 0;
    for (int c = 0; c < 5; ++c) square += double(x.at(r, c)) * x.at(r, c);
    for (int c = 0; c < 5; ++c) {
      EXPECT_NEAR(y.at(r, c), x.at(r, c) / std::sqrt(square / 5 + 1e-5) * gain.value[c], 1e-6);
    }
  }
}

TEST(Layers, SwigluMatchesFiniteDifferences) {
  Swiglu l;
  CheckGradients(l, 4, /*in: gate and up=*/2 * 5, /*out=*/5);
}

TEST(Layers, SwigluIsSiluOfGateTimesUp) {
  MemoryAccount account;
  const Tensor x = Random(&account, 2, 6, 8);
  Swiglu l;
  Saved saved;
  const Tensor y = l.Forward(x, saved, Mode::kTrain);
  ASSERT_EQ(y.cols(), 3);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      const double gate = x.at(r, c), up = x.at(r, 3 + c);
      EXPECT_NEAR(y.at(r, c), gate / (1 + std::exp(-gate)) * up, 1e-6);
    }
  }
}

TEST(Layers, SquaredReluMatchesFiniteDifferences) {
  SquaredRelu l;
  CheckGradients(l, 4, 6, 6);
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

TEST(Layers, GroupedQueryAttentionWithRotaryPositionsMatchesFiniteDifferences) {
  for (int kv_heads : {4, 2, 1}) {
    for (bool rope : {false, true}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(fmt::format("kv_heads {}, {}, {}", kv_heads, rope ? "rotary" : "no positions",
                                 causal ? "causal" : "full"));
        SelfAttention a(5, {.d = 8, .heads = 4, .kv_heads = kv_heads, .seq = 3, .causal = causal, .rope = rope,
                            .bias = kv_heads != 2});
        // QKV is d + 2 kv_heads d/h wide: the parameters the cost model counts.
        int64_t params = 0;
        for (Param* p : a.Params()) params += static_cast<int64_t>(p->value.size());
        const int64_t kv = 8 * kv_heads / 4, bias = kv_heads != 2 ? 8 + 2 * kv + 8 : 0;
        EXPECT_EQ(params, 8 * (8 + 2 * kv) + 8 * 8 + bias);
        CheckGradients(a, /*rows=*/2 * 3, 8, 8);
      }
    }
  }
}

// With kv_heads = heads and no rotary positions, the general attention is
// GPT's, bit for bit; with kv_heads < heads, it is multi-head attention whose
// K and V heads are copies of the shared ones (weights copied group-wise).
TEST(Layers, GroupedQueryAttentionIsMultiHeadWithSharedKeysAndValues) {
  const int d = 8, H = 4, G = 2, S = 3, dh = d / H, group = H / G;
  for (bool rope : {false, true}) {
    SCOPED_TRACE(rope ? "rotary" : "no positions");
    SelfAttention gqa(3, {.d = d, .heads = H, .kv_heads = G, .seq = S, .causal = true, .rope = rope});
    SelfAttention mha(4, {.d = d, .heads = H, .seq = S, .causal = true, .rope = rope});
    auto g = gqa.Params(), m = mha.Params();  // qkv weight, bias, out weight, bias
    // Row o of the (d + 2 G dh, d) QKV weight makes output column o.
    auto source_row = [&](int o) {
      if (o < d) return o;                                       // Q
      const int part = (o - d) / d, within = (o - d) % d;       // K or V, then the query head's column
      return d + part * G * dh + within / dh / group * dh + within % dh;
    };
    for (int o = 0; o < 3 * d; ++o) {
      std::copy_n(&g[0]->value[static_cast<size_t>(source_row(o)) * d], d, &m[0]->value[static_cast<size_t>(o) * d]);
      m[1]->value[o] = g[1]->value[source_row(o)];
    }
    m[2]->value = g[2]->value;
    m[3]->value = g[3]->value;
    MemoryAccount account;
    const Tensor x = Random(&account, 2 * S, d, 6);
    Saved a, b;
    const Tensor ya = gqa.Forward(x, a, Mode::kTrain), yb = mha.Forward(x, b, Mode::kTrain);
    for (int i = 0; i < ya.rows() * ya.cols(); ++i) EXPECT_NEAR(ya.data()[i], yb.data()[i], 1e-5) << i;
  }
}

// Half-split pairs (Llama's rotate_half): column i with i + dh/2, turned by
// pos theta^(-2i/dh); the inverse turns back; a query and a key turned to
// positions m and n meet as if at m - n and 0.
TEST(Layers, RotaryTurnsHalfSplitPairsByPositionAngles) {
  const int S = 5, dh = 6, half = dh / 2;
  Rotary rope(S, dh);
  MemoryAccount account;
  const Tensor x = Random(&account, 2 * S, 2 * dh, 3);  // 2 samples, 2 heads
  Tensor y = x;
  rope.Apply(y, 0, 2, false);
  for (int r = 0; r < 2 * S; ++r) {
    const int pos = r % S;
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < half; ++i) {
        const double angle = pos * std::pow(10000.0, -2.0 * i / dh);
        const double a = x.at(r, h * dh + i), b = x.at(r, h * dh + half + i);
        EXPECT_NEAR(y.at(r, h * dh + i), a * std::cos(angle) - b * std::sin(angle), 1e-5);
        EXPECT_NEAR(y.at(r, h * dh + half + i), b * std::cos(angle) + a * std::sin(angle), 1e-5);
      }
    }
  }
  Tensor back = y;
  rope.Apply(back, 0, 2, true);
  for (int i = 0; i < x.rows() * x.cols(); ++i) EXPECT_NEAR(back.data()[i], x.data()[i], 1e-5);
  // Relative positions: <R(m) q, R(n) k> = <R(m - n) q, k>.
  auto dot_at = [&](int m, int n) {
    Tensor q(&account, S, dh), k(&account, S, dh);
    for (int c = 0; c < dh; ++c) q.at(m, c) = x.at(0, c), k.at(n, c) = x.at(1, c);
    rope.Apply(q, 0, 1, false);
    rope.Apply(k, 0, 1, false);
    double s = 0;
    for (int c = 0; c < dh; ++c) s += double(q.at(m, c)) * k.at(n, c);
    return s;
  };
  EXPECT_NEAR(dot_at(4, 1), dot_at(3, 0), 1e-5);
  EXPECT_NEAR(dot_at(2, 2), dot_at(0, 0), 1e-5);
}

TEST(Layers, TransformerBlockMatchesFiniteDifferences) {
  TransformerBlock b(9, /*d=*/4, /*ffn=*/8, /*heads=*/2, /*seq=*/3, /*causal=*/true);
  CheckGradients(b, /*rows=*/2 * 3, 4, 4);
}

// Every block the generator's options make: the MLP kinds, both norms,
// grouped-query attention with rotary positions, biases on and off.
TEST(Layers, LlamaClassBlocksMatchFiniteDifferences) {
  for (auto mlp : {cost::MlpKind::kGelu, cost::MlpKind::kSwiglu, cost::MlpKind::kSquaredRelu}) {
    for (auto norm : {cost::NormKind::kLayerNorm, cost::NormKind::kRmsNorm}) {
      for (bool bias : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {} bias {}", ir::NameOf(cost::kMlpKindNames, mlp),
                                 ir::NameOf(cost::kNormKindNames, norm), bias));
        const cost::TransformerSpec spec{.d_model = 8, .ffn = 6, .heads = 4, .seq = 3, .causal = true, .kv_heads = 2,
                                         .mlp = mlp, .norm = norm, .position = cost::PositionKind::kRope,
                                         .bias = bias};
        TransformerBlock b(11, spec);
        CheckGradients(b, /*rows=*/2 * 3, 8, 8);
      }
    }
  }
}

TEST(Layers, EmbeddingTablesMatchFiniteDifferences) {
  // Token ids have no gradient; the tables' (token and position) do.
  for (bool positions : {true, false}) {
  SCOPED_TRACE(positions ? "learned positions" : "tokens only");
  Embedding e(3, /*vocab=*/5, /*seq=*/3, /*d=*/2, positions);
  EXPECT_EQ(e.Params().size(), positions ? 2u : 1u);
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
}

// Tied embeddings: the logits reuse the token table, so the table's gradient
// is the sum of both uses. The embedding keeps the original, the head a copy;
// after TiedGradients::Sum each holds original + copy, which is the finite
// difference of the loss with the one table (both copies) moved.
TEST(Layers, TiedEmbeddingGradientIsTheSumOfBothUses) {
  const int V = 5, S = 3, d = 4;
  Embedding e(3, V, S, d, /*positions=*/false);
  e.TieTokens();
  Linear logits(9, d, V, /*bias=*/true);
  logits.TieWeight(Embedding::TokenTable(3, V, d, Embedding::TiedBound(d)));
  Param& original = *e.Params().at(0);
  Param& copy = *logits.Params().at(0);
  ASSERT_EQ(original.value, copy.value);
  EXPECT_EQ(original.tie, Tie::kOriginal);
  EXPECT_EQ(copy.tie, Tie::kCopy);
  MemoryAccount account;
  Tensor ids(&account, 2, S);
  const float tokens[] = {0, 4, 4, 2, 1, 4};
  std::copy(std::begin(tokens), std::end(tokens), ids.data());
  const Tensor w = Random(&account, 2 * S, V, 2);
  auto objective = [&] {
    Saved se, sl;
    const Tensor y = logits.Forward(e.Forward(ids, se, Mode::kRecompute), sl, Mode::kRecompute);
    double s = 0;
    for (int i = 0; i < y.rows() * y.cols(); ++i) s += double(y.data()[i]) * w.data()[i];
    return s;
  };
  Saved se, sl;
  logits.Forward(e.Forward(ids, se, Mode::kTrain), sl, Mode::kTrain);
  e.Backward(logits.Backward(w, sl), se);
  ir::Schedule one_device;
  one_device.num_devices = 1;
  one_device.placement = {0};
  TiedGradients tied(one_device, /*mpi=*/false, -1);
  ASSERT_EQ(tied.Sum(0, {&original, &copy}, std::chrono::steady_clock::time_point::max()), SyncStatus::kOk);
  for (size_t i = 0; i < original.value.size(); ++i) {
    EXPECT_EQ(original.grad[i], copy.grad[i]);
    const float keep = original.value[i];
    original.value[i] = copy.value[i] = keep + 1e-2f;
    const double up = objective();
    original.value[i] = copy.value[i] = keep - 1e-2f;
    const double down = objective();
    original.value[i] = copy.value[i] = keep;
    EXPECT_NEAR(original.grad[i], (up - down) / 2e-2, 2e-3) << i;
  }
}

// Held on two devices, the two tied gradients meet and become the same sum
// as one device's, bit for bit, in every replica.
TEST(Layers, TiedGradientsOnTwoDevicesSumAsOneDeviceDoes) {
  ir::Schedule two;
  two.num_devices = 2;
  two.replicas = 2;
  two.placement = {0, 1};
  TiedGradients tied(two, /*mpi=*/false, -1);
  const std::vector<double> a = {0.1, -3e-9, 7.25, 1e10}, b = {0.2, 5e-9, -7.25, 3.0};
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (int replica = 0; replica < 2; ++replica) {
    for (Tie side : {Tie::kOriginal, Tie::kCopy}) {
      threads.emplace_back([&, replica, side] {
        std::vector<double> g = side == Tie::kOriginal ? a : b;
        EXPECT_EQ(tied.Exchange(replica, side, g, std::chrono::steady_clock::now() + std::chrono::seconds(30)),
                  SyncStatus::kOk);
        got[replica * 2 + (side == Tie::kCopy)] = g;
      });
    }
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) {
    ASSERT_EQ(g.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(g[i], a[i] + b[i]) << i;
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
