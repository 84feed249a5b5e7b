#include "partition/partitioner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ir/units.h"

namespace twinpipe::partition {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Result<void> CheckShape(const PartitionProblem& p) {
  if (p.num_cells < 1) return Fail(fmt::format("need at least one cell, got {}", p.num_cells));
  if (p.num_layers < p.num_cells) {
    return Fail(fmt::format("{} layers cannot fill {} cells (each cell needs a layer)", p.num_layers,
                            p.num_cells));
  }
  return {};
}

// After cell k's capacity in a message: the cap, where one holds it below its device's memory.
std::string_view CappedBy(const PartitionProblem& p, int k) {
  return k < static_cast<int>(p.capped.size()) && p.capped[k]
             ? " under the memory cap (/pipeline/memory_cap or --memory-cap)"
             : "";
}

std::string LayerName(const PartitionProblem& p, int i) {
  return i < static_cast<int>(p.layer_names.size()) ? fmt::format("layer {} ({})", i, p.layer_names[i])
                                                     : fmt::format("layer {}", i);
}

// Greedy test for one device class and no cut costs: can K cells each
// costing at most `limit` cover all layers? Each cell takes the most layers
// that fit; exact here because a later start never makes any cell costlier.
// O(K log L). Fills `firsts` when they can.
bool GreedyFeasible(const PartitionProblem& p, double limit, std::vector<int>& firsts) {
  const int L = p.num_layers, K = p.num_cells;
  const auto& pre = p.prefix[p.cell_class[0]];
  firsts.assign(K, 0);
  int a = 0;
  for (int k = 0; k < K; ++k) {
    firsts[k] = a;
    if (k == K - 1) return p.CellCost(k, a, L - 1) <= limit;
    const int b_max = L - 1 - (K - 1 - k);  // leave a layer for each later cell
    // One past the largest b that fits (rounding), then down to one that does.
    auto it = std::upper_bound(pre.begin() + a + 1, pre.begin() + b_max + 2, pre[a] + limit);
    int b = std::min(b_max, static_cast<int>(it - pre.begin()) - 1);
    while (b >= a && p.CellCost(k, a, b) > limit) --b;
    if (b < a) return false;
    a = b + 1;
  }
  return true;
}

// Exact test in general (device classes per cell, cut costs): the set of
// layers at which cell k can start is swept left to right. For a fixed cell
// the latest reachable start at or before b is the best one to end at b (its
// prefix is largest), so each cell costs O(window). Starts are kept only in a
// window: at or after the earliest start from which the remaining cells could
// still cover the rest on the fastest class, and no further than the previous
// cell could reach. O(K L) at worst, about O(L) near the optimum.
bool SweepFeasible(const PartitionProblem& p, const std::vector<double>& fastest, double limit,
                   std::vector<int>& firsts) {
  const int L = p.num_layers, K = p.num_cells;
  struct Window {
    int offset = 0;
    std::vector<char> reach;  // reach[i]: a cell may start at layer offset + i
    bool at(int pos) const {
      return pos >= offset && pos < offset + static_cast<int>(reach.size()) && reach[pos - offset];
    }
  };
  std::vector<Window> windows(K + 1);
  windows[0].reach.assign(1, 1);
  for (int k = 0; k < K; ++k) {
    const Window& from = windows[k];
    // Starts from which the remaining K - k cells cannot cover layers up to L
    // even on the fastest class are dropped.
    const double need = fastest[L] - static_cast<double>(K - k) * limit;
    const int earliest = static_cast<int>(std::lower_bound(fastest.begin(), fastest.end(), need) - fastest.begin());
    const auto& pre = p.prefix[p.cell_class[k]];
    int first = -1, last = -1;
    for (int i = 0; i < static_cast<int>(from.reach.size()); ++i) {
      if (!from.reach[i] || from.offset + i < earliest) continue;
      if (first < 0) first = from.offset + i;
      last = from.offset + i;
    }
    if (first < 0 || first >= L) return false;
    Window& to = windows[k + 1];
    to.offset = first + 1;
    int start = -1;
    std::vector<char>& out = to.reach;
    for (int b = first; b < L; ++b) {
      if (b <= last && from.at(b) && b >= earliest) start = b;
      if (pre[b + 1] - pre[start] > limit && b >= last) break;  // nothing later fits
      if (p.CellCost(k, start, b) <= limit) {
        out.resize(b + 2 - to.offset, 0);
        out[b + 1 - to.offset] = 1;
      }
    }
    if (out.empty()) return false;
  }
  if (!windows[K].at(L)) return false;
  firsts.assign(K, 0);
  for (int k = K - 1, end = L; k > 0; --k) {
    int a = end - 1;
    while (!(windows[k].at(a) && p.CellCost(k, a, end - 1) <= limit)) --a;
    firsts[k] = a;
    end = a;
  }
  return true;
}

bool Simple(const PartitionProblem& p) {
  const bool one_class = std::all_of(p.cell_class.begin(), p.cell_class.end(),
                                     [&](int c) { return c == p.cell_class[0]; });
  const bool no_cuts = std::all_of(p.cut_costs.begin(), p.cut_costs.end(), [](const std::vector<double>& costs) {
    return std::all_of(costs.begin(), costs.end(), [](double c) { return c == 0; });
  });
  return one_class && no_cuts;
}

// Smallest bottleneck for which `feasible` holds, by bisection in [lo, hi]
// (hi feasible); returns the cells of the final probe.
template <typename Test>
Partition Bisect(const PartitionProblem& p, double lo, double hi, Test feasible) {
  std::vector<int> firsts, best;
  feasible(hi, best);
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (feasible(mid, firsts)) {
      hi = mid;
      best = firsts;
    } else {
      lo = mid;
    }
  }
  auto costs = CellCosts(p, best);
  return Partition{best, *std::max_element(costs.begin(), costs.end())};
}

// An upper bound of any cell's cost: the whole model on the slowest class
// plus every cut, at its dearest link.
double WholeModelCost(const PartitionProblem& p) {
  double whole = 0;
  for (const auto& pre : p.prefix) whole = std::max(whole, pre.back());
  for (int j = 0; j + 1 < p.num_layers; ++j) {
    double most = 0;
    for (const auto& costs : p.cut_costs) most = std::max(most, costs[j]);
    whole += most;
  }
  return whole;
}

// Every layer and cut costs 0 or more (no NaN): a cell only gets costlier
// as its start moves left, which the pruned searches rely on.
bool NoCostBelowZero(const PartitionProblem& p) {
  return std::all_of(p.prefix.begin(), p.prefix.end(),
                     [](const std::vector<double>& pre) {
                       for (size_t i = 1; i < pre.size(); ++i) {
                         if (!(pre[i] >= pre[i - 1])) return false;
                       }
                       return true;
                     }) &&
         std::all_of(p.cut_costs.begin(), p.cut_costs.end(), [](const std::vector<double>& costs) {
           return std::all_of(costs.begin(), costs.end(), [](double c) { return c >= 0; });
         });
}

// A feasible bottleneck under memory, quickly, to bound the exact search
// (MinMaxUnderMemory): each cell takes layers while its compute stays
// within `limit` and it fits, ending at the farthest layer whose cost with
// its cut is within `limit`; the limit grows from the fastest class's even
// share until that works, then bisects a few steps down. Any partition it
// finds fits and costs what it says, whatever the memory function; where
// none is found the bound is infinite. O(L) memory tests a probe.
template <typename Fits>
double FeasibleBottleneckUnderMemory(const PartitionProblem& p, const Fits& fits) {
  const int L = p.num_layers, K = p.num_cells;
  std::vector<int> firsts(K, 0);
  auto greedy = [&](double limit) {
    int a = 0;
    for (int k = 0; k < K; ++k) {
      firsts[k] = a;
      if (k == K - 1) return p.CellCost(k, a, L - 1) <= limit && fits(a, L - 1, k);
      const auto& pre = p.prefix[p.cell_class[k]];
      const int b_max = L - 1 - (K - 1 - k);
      int best = -1;
      for (int b = a; b <= b_max && pre[b + 1] - pre[a] <= limit && fits(a, b, k); ++b) {
        if (p.CellCost(k, a, b) <= limit) best = b;
      }
      if (best < 0) return false;
      a = best + 1;
    }
    return true;
  };
  // Past the whole model's cost, with every cut, no cell is bound by its
  // cost: what fails there fails for memory, and more limit does nothing.
  double share = 0;
  for (const auto& pre : p.prefix) share = std::max(share, pre.back() / K);
  const double whole = WholeModelCost(p);
  double lo = 0, hi = share > 0 ? share : 1e-300;
  bool found = false;
  for (int i = 0; i < 64 && !found; ++i) {
    found = greedy(hi);
    if (!found) {
      if (hi > whole) return kInf;
      lo = hi;
      hi *= 1.5;
    }
  }
  if (!found) return kInf;
  double bound = kInf;
  auto keep = [&] {
    const auto costs = CellCosts(p, firsts);
    bound = std::min(bound, *std::max_element(costs.begin(), costs.end()));
  };
  keep();  // the last probe's cells: the first limit that worked
  for (int i = 0; i < 6; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (greedy(mid)) {
      hi = mid;
      keep();
    } else {
      lo = mid;
    }
  }
  return bound;
}

// Whether the floor lets layers 0..L-1 be covered by the cells in order,
// each as far as its floor fits (an empty cell where not even its first
// layer does: more partitions than there are, so a "no" holds for them).
// Exact for a floor that never grows as a cell shrinks: any partition
// whose floors fit ends each of its cells no later than this does.
bool FloorCovers(const PartitionProblem& p) {
  const int L = p.num_layers;
  int next = 0;  // the first layer not yet covered
  for (int k = 0; k < p.num_cells && next < L; ++k) {
    const int start = next;
    while (next < L && p.memory_floor(start, next, k) <= p.capacity[k]) ++next;
  }
  return next == L;
}

}  // namespace

PartitionProblem UniformProblem(const std::vector<double>& costs, int cells) {
  PartitionProblem p;
  p.num_layers = static_cast<int>(costs.size());
  p.num_cells = cells;
  p.prefix.assign(1, std::vector<double>(costs.size() + 1, 0.0));
  for (size_t i = 0; i < costs.size(); ++i) p.prefix[0][i + 1] = p.prefix[0][i] + costs[i];
  p.cell_class.assign(std::max(cells, 0), 0);
  p.cut_costs.assign(1, std::vector<double>(costs.empty() ? 0 : costs.size() - 1, 0.0));
  p.cut_class.assign(std::max(cells, 0), 0);
  return p;
}

std::vector<double> CellCosts(const PartitionProblem& p, const std::vector<int>& firsts) {
  std::vector<double> costs;
  for (size_t k = 0; k < firsts.size(); ++k) {
    const int last = k + 1 < firsts.size() ? firsts[k + 1] - 1 : p.num_layers - 1;
    costs.push_back(p.CellCost(static_cast<int>(k), firsts[k], last));
  }
  return costs;
}

Result<Partition> MinMax(const PartitionProblem& p) {
  if (auto ok = CheckShape(p); !ok) return tl::unexpected(ok.error());
  // An upper bound: the whole model on the slowest class plus every cut.
  double hi = WholeModelCost(p) * (1 + 1e-12) + 1e-300;
  if (Simple(p)) {
    return Bisect(p, 0, hi, [&](double limit, std::vector<int>& f) { return GreedyFeasible(p, limit, f); });
  }
  // Per layer, the cheapest class: its prefix sums bound what cells can cover.
  std::vector<double> fastest(p.num_layers + 1, 0.0);
  for (int i = 0; i < p.num_layers; ++i) {
    double best = INFINITY;
    for (const auto& pre : p.prefix) best = std::min(best, pre[i + 1] - pre[i]);
    fastest[i + 1] = fastest[i] + best;
  }
  // Bracket: the fastest class without cuts is a relaxation (a lower bound);
  // its partition, costed for real, is feasible (an upper bound).
  PartitionProblem relaxed = UniformProblem({}, p.num_cells);
  relaxed.num_layers = p.num_layers;
  relaxed.prefix = {fastest};
  relaxed.cut_costs.assign(1, std::vector<double>(std::max(0, p.num_layers - 1), 0.0));
  relaxed.cut_class.assign(p.num_cells, 0);
  const Partition low = Bisect(relaxed, 0, hi, [&](double limit, std::vector<int>& f) {
    return GreedyFeasible(relaxed, limit, f);
  });
  const auto costs = CellCosts(p, low.first_layers);
  hi = std::min(hi, *std::max_element(costs.begin(), costs.end()) * (1 + 1e-12));
  return Bisect(p, low.bottleneck * (1 - 1e-12), hi,
                [&](double limit, std::vector<int>& f) { return SweepFeasible(p, fastest, limit, f); });
}

Result<Partition> MinVariance(const PartitionProblem& p) {
  if (auto ok = CheckShape(p); !ok) return tl::unexpected(ok.error());
  const int L = p.num_layers, K = p.num_cells;
  // f[k][b]: least sum of squared cell costs covering layers 0..b with cells
  // 0..k; only ends that leave a layer for each later cell are ever used.
  std::vector<std::vector<double>> f(K, std::vector<double>(L, kInf));
  std::vector<std::vector<int>> from(K, std::vector<int>(L, -1));
  for (int b = 0; b <= L - K; ++b) {
    const double c = p.CellCost(0, 0, b);
    f[0][b] = c * c;
  }
  // With costs of no sign below zero a cell only gets costlier as its start
  // moves left, so from b down the scan stops once the cell alone costs more
  // than the best so far; equal sums keep the leftmost start, as a scan from
  // the left taking only strict improvements would.
  const bool monotone = NoCostBelowZero(p);
  for (int k = 1; k < K; ++k) {
    for (int b = k; b <= L - K + k; ++b) {
      for (int a = b; a >= k; --a) {
        const double c = p.CellCost(k, a, b);
        if (monotone && c * c > f[k][b]) break;
        if (f[k - 1][a - 1] == kInf) continue;
        const double v = f[k - 1][a - 1] + c * c;
        if (v <= f[k][b]) {
          f[k][b] = v;
          from[k][b] = a;
        }
      }
    }
  }
  std::vector<int> firsts(K, 0);
  for (int k = K - 1, b = L - 1; k > 0; --k) {
    firsts[k] = from[k][b];
    b = firsts[k] - 1;
  }
  auto costs = CellCosts(p, firsts);
  return Partition{firsts, *std::max_element(costs.begin(), costs.end())};
}

Result<Partition> MinMaxUnderMemory(const PartitionProblem& p) {
  if (auto ok = CheckShape(p); !ok) return tl::unexpected(ok.error());
  if (!p.memory) return MinMax(p);
  const int L = p.num_layers, K = p.num_cells;
  auto fits = [&](int a, int b, int k) { return p.memory(a, b, k) <= p.capacity[k]; };
  // A partition that fits bounds the answer: prefixes that cost as much are
  // no way to it, nor are cells that do. The bound sits just above that
  // partition's bottleneck, so the optimum, and the choice among equal ones
  // (the first a, from b down, of the least value), stay the unbounded
  // search's; the search only skips what cannot beat the bound.
  // (Costs below zero or NaN: no bound, the whole table.)
  // Nothing fits where not even the floor does (most of the search's
  // hopeless cuts): no table.
  const bool hopeless = p.memory_floor && !FloorCovers(p);
  const double feasible = !hopeless && NoCostBelowZero(p) ? FeasibleBottleneckUnderMemory(p, fits) : kInf;
  const double cap = feasible == kInf ? kInf : feasible + std::abs(feasible) * 1e-9 + 1e-300;
  // g[k][b]: least bottleneck covering layers 0..b with cells 0..k that all
  // fit, or `cap` where that is no less.
  std::vector<std::vector<double>> g(K, std::vector<double>(L, cap));
  std::vector<std::vector<int>> from(K, std::vector<int>(L, -1));
  for (int b = 0; !hopeless && b <= L - K; ++b) {  // only ends that leave a layer for each later cell
    const double c = p.CellCost(0, 0, b);
    if ((cap == kInf || c < cap) && fits(0, b, 0)) g[0][b] = c;  // (a NaN cost only with no bound)
  }
  // Cell k starts after an end of cell k - 1 that some fitting prefix
  // reaches (`ends`, ascending): only those are tried, from b down, as
  // before; where there is none, nothing fits.
  std::vector<int> ends;
  for (int k = 1; k < K && !hopeless; ++k) {
    ends.clear();
    for (int j = k - 1; j <= L - K + k - 1; ++j) {
      if (g[k - 1][j] < cap) ends.push_back(j);
    }
    if (ends.empty()) break;
    size_t below = 0;  // ends[0, below) end before b
    for (int b = k; b <= L - K + k; ++b) {
      while (below < ends.size() && ends[below] < b) ++below;
      for (size_t i = below; i-- > 0;) {
        const int a = ends[i] + 1;
        const double c = p.CellCost(k, a, b);
        if (c >= g[k][b]) break;  // cells only get costlier as a moves left
        // Nothing to gain: spare the memory test.
        if (g[k - 1][a - 1] >= g[k][b] || !fits(a, b, k)) continue;
        const double v = std::max(g[k - 1][a - 1], c);
        if (v < g[k][b]) {
          g[k][b] = v;
          from[k][b] = a;
        }
      }
    }
  }
  if (g[K - 1][L - 1] >= cap) {  // only with no bound: any partition that fits is below it
    if (!p.explain) return FailRuntime(fmt::format("no partition into {} cells fits in memory", K));
    // Say why: a layer that fits nowhere, or the cell that overflows most in
    // the unconstrained minmax partition.
    for (int i = 0; i < L; ++i) {
      double best_over = kInf;
      int best_k = 0;
      for (int k = 0; k < K; ++k) {
        const double over = p.memory(i, i, k) - p.capacity[k];
        if (over < best_over) {
          best_over = over;
          best_k = k;
        }
      }
      if (best_over > 0) {
        return FailRuntime(fmt::format("{} alone needs {} but device {} holds {}{}: {} over", LayerName(p, i),
                                GiB(p.memory(i, i, best_k)), best_k, GiB(p.capacity[best_k]), CappedBy(p, best_k),
                                GiB(best_over)));
      }
    }
    auto mm = MinMax(p);
    int worst = 0;
    double worst_over = -kInf;
    for (int k = 0; k < K; ++k) {
      const int a = mm->first_layers[k], b = k + 1 < K ? mm->first_layers[k + 1] - 1 : L - 1;
      const double over = p.memory(a, b, k) - p.capacity[k];
      if (over > worst_over) {
        worst_over = over;
        worst = k;
      }
    }
    const int a = mm->first_layers[worst], b = worst + 1 < K ? mm->first_layers[worst + 1] - 1 : L - 1;
    return FailRuntime(fmt::format("no partition into {} cells fits in memory; in the fastest partition cell {} "
                            "(layers {}..{}) needs {} on device {}, which holds {}{}: {} over",
                            K, worst, a, b, GiB(p.memory(a, b, worst)), worst, GiB(p.capacity[worst]), CappedBy(p, worst),
                            GiB(worst_over)));
  }
  std::vector<int> firsts(K, 0);
  for (int k = K - 1, b = L - 1; k > 0; --k) {
    firsts[k] = from[k][b];
    b = firsts[k] - 1;
  }
  return Partition{firsts, g[K - 1][L - 1]};
}

Result<Partition> Manual(const PartitionProblem& p, const std::vector<int>& firsts) {
  if (auto ok = CheckShape(p); !ok) return tl::unexpected(ok.error());
  if (static_cast<int>(firsts.size()) != p.num_cells) {
    return Fail(fmt::format(": lists {} first layers, expected one per cell ({})", firsts.size(), p.num_cells));
  }
  if (firsts[0] != 0) return Fail(fmt::format("/0: the first cell must start at layer 0, got {}", firsts[0]));
  for (size_t k = 1; k < firsts.size(); ++k) {
    if (firsts[k] <= firsts[k - 1] || firsts[k] >= p.num_layers) {
      return Fail(fmt::format("/{}: expected a layer index above {} and below {}, got {}", k, firsts[k - 1],
                              p.num_layers, firsts[k]));
    }
  }
  auto costs = CellCosts(p, firsts);
  return Partition{firsts, *std::max_element(costs.begin(), costs.end())};
}

}  // namespace twinpipe::partition
