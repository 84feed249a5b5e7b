#include "partition/partitioner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace twinpipe::partition {
namespace {

// Every way to cut L layers into K non-empty consecutive cells.
void ForEachPartition(int L, int K, const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> firsts(K, 0);
  std::function<void(int, int)> rec = [&](int k, int start) {
    if (k == K) {
      visit(firsts);
      return;
    }
    for (int a = start; a <= L - (K - k); ++a) {
      firsts[k] = a;
      rec(k + 1, a + 1);
    }
  };
  firsts[0] = 0;
  rec(1, 1);
  if (K == 1) visit(firsts);
}

PartitionProblem RandomProblem(std::mt19937_64& rng, int L, int K, bool heterogeneous, bool comm) {
  std::uniform_real_distribution<double> cost(0.0, 10.0);
  std::vector<double> costs(L);
  for (double& c : costs) c = std::floor(cost(rng) * 4) / 4;  // ties happen
  PartitionProblem p = UniformProblem(costs, K);
  if (heterogeneous) {
    std::vector<double> slow(L + 1, 0.0);
    for (int i = 0; i < L; ++i) slow[i + 1] = slow[i] + costs[i] * 1.75;
    p.prefix.push_back(slow);
    for (int k = 0; k < K; ++k) p.cell_class[k] = static_cast<int>(rng() % 2);
  }
  if (comm) {
    // Two links (inside a node, between nodes), cells on either at random.
    for (double& c : p.cut_costs[0]) c = cost(rng) / 3;
    std::vector<double> slow(p.cut_costs[0].size());
    for (double& c : slow) c = cost(rng);
    p.cut_costs.push_back(slow);
    for (int k = 0; k < K; ++k) p.cut_class[k] = static_cast<int>(rng() % 2);
  }
  return p;
}

double Bottleneck(const PartitionProblem& p, const std::vector<int>& firsts) {
  auto costs = CellCosts(p, firsts);
  return *std::max_element(costs.begin(), costs.end());
}

double SumSquares(const PartitionProblem& p, const std::vector<int>& firsts) {
  double s = 0;
  for (double c : CellCosts(p, firsts)) s += c * c;
  return s;
}

TEST(MinMax, EqualsBruteForceOnRandomInstances) {
  std::mt19937_64 rng(42);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 14);
    const int K = 1 + static_cast<int>(rng() % std::min(5, L));
    const PartitionProblem p = RandomProblem(rng, L, K, trial % 3 == 1, trial % 3 == 2);
    double best = INFINITY;
    ForEachPartition(L, K, [&](const std::vector<int>& f) { best = std::min(best, Bottleneck(p, f)); });
    auto got = MinMax(p);
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_EQ(got->first_layers.size(), static_cast<size_t>(K));
    EXPECT_NEAR(got->bottleneck, best, 1e-9 * std::max(1.0, best)) << "trial " << trial;
    EXPECT_DOUBLE_EQ(got->bottleneck, Bottleneck(p, got->first_layers));
    ++checked;
  }
  EXPECT_EQ(checked, 3000);
}

TEST(MinVariance, EqualsBruteForceMinimumVariance) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 14);
    const int K = 1 + static_cast<int>(rng() % std::min(5, L));
    const PartitionProblem p = RandomProblem(rng, L, K, trial % 2 == 1, trial % 4 == 2);
    double best = INFINITY;
    ForEachPartition(L, K, [&](const std::vector<int>& f) { best = std::min(best, SumSquares(p, f)); });
    auto got = MinVariance(p);
    ASSERT_TRUE(got);
    EXPECT_NEAR(SumSquares(p, got->first_layers), best, 1e-9 * std::max(1.0, best)) << "trial " << trial;
  }
}

TEST(MinMaxUnderMemory, NeverExceedsTheCapAndIsInfeasibleExactlyWhenBruteForceSays) {
  std::mt19937_64 rng(99);
  int infeasible = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 12);
    const int K = 1 + static_cast<int>(rng() % std::min(5, L));
    PartitionProblem p = RandomProblem(rng, L, K, trial % 2 == 1, trial % 3 == 0);
    // Memory: per-layer weights plus an input buffer that depends on the
    // cut (not monotone), and a per-cell capacity.
    std::vector<double> weights(L), input(L);
    std::uniform_real_distribution<double> u(0.0, 10.0);
    for (int i = 0; i < L; ++i) {
      weights[i] = u(rng);
      input[i] = u(rng);
    }
    p.memory = [weights, input](int a, int b, int k) {
      double m = input[a] + k;
      for (int i = a; i <= b; ++i) m += weights[i];
      return m;
    };
    p.capacity.assign(K, 0);
    for (double& c : p.capacity) c = 8 + u(rng) * 3;
    double best = INFINITY;
    ForEachPartition(L, K, [&](const std::vector<int>& f) {
      for (int k = 0; k < K; ++k) {
        const int last = k + 1 < K ? f[k + 1] - 1 : L - 1;
        if (p.memory(f[k], last, k) > p.capacity[k]) return;
      }
      best = std::min(best, Bottleneck(p, f));
    });
    auto got = MinMaxUnderMemory(p);
    if (best == INFINITY) {
      ASSERT_FALSE(got) << "trial " << trial;
      EXPECT_EQ(got.error().kind, ErrorKind::kRuntime);
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(got) << "trial " << trial << ": " << got.error().message;
    for (int k = 0; k < K; ++k) {
      const int last = k + 1 < K ? got->first_layers[k + 1] - 1 : L - 1;
      EXPECT_LE(p.memory(got->first_layers[k], last, k), p.capacity[k]);
    }
    EXPECT_NEAR(got->bottleneck, best, 1e-9 * std::max(1.0, best)) << "trial " << trial;
  }
  EXPECT_GT(infeasible, 100);  // the instances exercise both outcomes
  EXPECT_LT(infeasible, 1900);
}

TEST(MinMaxUnderMemory, NamesALayerThatFitsNowhere) {
  PartitionProblem p = UniformProblem({1, 1, 1}, 2);
  p.layer_names = {"a", "big", "c"};
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  p.memory = [](int a, int b, int) { return ((a <= 1 && 1 <= b ? 100.0 : 0.0) + (b - a + 1)) * kGiB; };
  p.capacity = {50 * kGiB, 60 * kGiB};
  auto got = MinMaxUnderMemory(p);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message,
            "layer 1 (big) alone needs 101.000 GiB but device 1 holds 60.000 GiB: 41.000 GiB over");
}

TEST(Manual, ValidatesIndices) {
  const PartitionProblem p = UniformProblem({1, 2, 3, 4}, 2);
  EXPECT_EQ(Manual(p, {0, 2})->bottleneck, 7);
  EXPECT_EQ(Manual(p, {1, 2}).error().message, "/0: the first cell must start at layer 0, got 1");
  EXPECT_EQ(Manual(p, {0, 4}).error().message, "/1: expected a layer index above 0 and below 4, got 4");
  EXPECT_EQ(Manual(p, {0}).error().message, ": lists 1 first layers, expected one per cell (2)");
}

TEST(MinMax, NeedsALayerPerCell) {
  auto got = MinMax(UniformProblem({1, 2}, 3));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "2 layers cannot fill 3 cells (each cell needs a layer)");
}

}  // namespace
}  // namespace twinpipe::partition
