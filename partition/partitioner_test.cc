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

// The full tables, as the partitioners filled them before they were pruned:
// every start of every cell tried (MinVariance from the left, taking strict
// improvements; MinMaxUnderMemory from b down, with no bound from a
// partition that fits). The pruned searches must choose the very same cells,
// ties included, so that no plan moves.
std::vector<int> FullTableMinVariance(const PartitionProblem& p) {
  const int L = p.num_layers, K = p.num_cells;
  std::vector<std::vector<double>> f(K, std::vector<double>(L, INFINITY));
  std::vector<std::vector<int>> from(K, std::vector<int>(L, -1));
  for (int b = 0; b <= L - K; ++b) f[0][b] = p.CellCost(0, 0, b) * p.CellCost(0, 0, b);
  for (int k = 1; k < K; ++k) {
    for (int b = k; b <= L - K + k; ++b) {
      for (int a = k; a <= b; ++a) {
        if (f[k - 1][a - 1] == INFINITY) continue;
        const double c = p.CellCost(k, a, b);
        if (f[k - 1][a - 1] + c * c < f[k][b]) {
          f[k][b] = f[k - 1][a - 1] + c * c;
          from[k][b] = a;
        }
      }
    }
  }
  std::vector<int> firsts(K, 0);
  for (int k = K - 1, b = L - 1; k > 0; --k) b = (firsts[k] = from[k][b]) - 1;
  return firsts;
}

std::vector<int> FullTableMinMaxUnderMemory(const PartitionProblem& p) {
  const int L = p.num_layers, K = p.num_cells;
  auto fits = [&](int a, int b, int k) { return p.memory(a, b, k) <= p.capacity[k]; };
  std::vector<std::vector<double>> g(K, std::vector<double>(L, INFINITY));
  std::vector<std::vector<int>> from(K, std::vector<int>(L, -1));
  for (int b = 0; b <= L - K; ++b) {
    if (fits(0, b, 0)) g[0][b] = p.CellCost(0, 0, b);
  }
  for (int k = 1; k < K; ++k) {
    for (int b = k; b <= L - K + k; ++b) {
      for (int a = b; a >= k; --a) {
        const double c = p.CellCost(k, a, b);
        if (c >= g[k][b]) break;
        if (g[k - 1][a - 1] >= g[k][b] || !fits(a, b, k)) continue;
        if (std::max(g[k - 1][a - 1], c) < g[k][b]) {
          g[k][b] = std::max(g[k - 1][a - 1], c);
          from[k][b] = a;
        }
      }
    }
  }
  if (g[K - 1][L - 1] == INFINITY) return {};
  std::vector<int> firsts(K, 0);
  for (int k = K - 1, b = L - 1; k > 0; --k) b = (firsts[k] = from[k][b]) - 1;
  return firsts;
}

TEST(Partitioners, PrunedSearchesChooseWhatTheFullTablesChoose) {
  std::mt19937_64 rng(2026);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 48);
    const int K = 1 + static_cast<int>(rng() % std::min(16, L));
    PartitionProblem p = RandomProblem(rng, L, K, trial % 2 == 1, trial % 3 == 0);
    if (trial % 5 == 4) {  // equal layers: ties everywhere
      for (auto& pre : p.prefix) {
        for (int i = 0; i <= L; ++i) pre[i] = i * (pre.back() > 0 ? 1.0 : 0.0);
      }
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " L " << L << " K " << K);
    ASSERT_EQ(MinVariance(p)->first_layers, FullTableMinVariance(p));
    std::vector<double> weights(L), input(L);
    std::uniform_real_distribution<double> u(0.0, 10.0);
    for (int i = 0; i < L; ++i) {
      weights[i] = std::floor(u(rng));
      input[i] = std::floor(u(rng));
    }
    p.memory = [weights, input](int a, int b, int k) {
      double m = input[a] + (k % 3);
      for (int i = a; i <= b; ++i) m += weights[i];
      return m;
    };
    const double room = 6 + u(rng) * (1 + 4.0 * L / K);
    p.capacity.assign(K, room);
    const std::vector<int> full = FullTableMinMaxUnderMemory(p);
    auto got = MinMaxUnderMemory(p);
    // With a floor that never grows as a cell shrinks, where it binds and
    // where it does not, alike.
    PartitionProblem floored = p;
    // With `binding`, the least input of any layer in place of the cell's
    // own; else less the first layer's weights too.
    const double least_input = *std::min_element(input.begin(), input.end());
    floored.memory_floor = [weights, least_input, binding = trial % 4 != 0](int a, int b, int k) {
      double m = (binding ? least_input : 0.0) + k % 3;
      for (int i = a + (binding ? 0 : 1); i <= b; ++i) m += weights[i];
      return m;
    };
    auto with_floor = MinMaxUnderMemory(floored);
    if (full.empty()) {
      ASSERT_FALSE(got);
      ASSERT_FALSE(with_floor);
      ++infeasible;
    } else {
      ASSERT_TRUE(got) << got.error().message;
      ASSERT_EQ(got->first_layers, full);
      ASSERT_TRUE(with_floor) << with_floor.error().message;
      ASSERT_EQ(with_floor->first_layers, full);
      ++feasible;
    }
  }
  EXPECT_GT(feasible, 500);
  EXPECT_GT(infeasible, 300);
  // Costs below zero or NaN (no config makes them, the API can): the whole
  // table, as before.
  PartitionProblem odd = UniformProblem({0, 10, -20, 5, 5}, 2);
  odd.memory = [](int, int, int) { return 0.0; };
  odd.capacity = {1, 1};
  ASSERT_TRUE(MinMaxUnderMemory(odd));
  EXPECT_EQ(MinMaxUnderMemory(odd)->first_layers, FullTableMinMaxUnderMemory(odd));
  EXPECT_EQ(MinVariance(odd)->first_layers, FullTableMinVariance(odd));
  PartitionProblem nan = UniformProblem({NAN}, 1);
  nan.memory = odd.memory;
  nan.capacity = {1};
  EXPECT_TRUE(MinMaxUnderMemory(nan));
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
  // A caller that only counts failures (search) is spared the search for why.
  p.explain = false;
  got = MinMaxUnderMemory(p);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().kind, ErrorKind::kRuntime);
  EXPECT_EQ(got.error().message, "no partition into 2 cells fits in memory");
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
