// Partitioners: cut L layers into K cells of consecutive layers, one per
// pipeline stage. The problem is abstract (per-layer costs per device class,
// a cost per cut, optional memory per cell), so the algorithms are tested
// against brute force on their own.
//
//   PartitionProblem p = UniformProblem({1, 2, 3, 4}, /*cells=*/2);
//   Partition best = *MinMax(p);   // first_layers {0, 3}, bottleneck 4
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/result.h"

namespace twinpipe::partition {

struct PartitionProblem {
  int num_layers = 0;
  int num_cells = 0;
  // Per device class: prefix sums of per-layer cost (size L + 1). Cell k runs
  // on class cell_class[k], so heterogeneous devices scale a cell's cost.
  std::vector<std::vector<double>> prefix;
  std::vector<int> cell_class;
  // Added to the cell that ends at layer j (its outgoing transfer), j < L - 1,
  // per class of the link that transfer takes (inside a node, between
  // nodes, none where the next cell is on the same device): cell k's
  // transfer costs cut_costs[cut_class[k]][j].
  std::vector<std::vector<double>> cut_costs;
  std::vector<int> cut_class;
  // Optional memory constraint: bytes cell k needs for layers [a, b], and the
  // capacity of cell k's device.
  std::function<double(int a, int b, int k)> memory;
  std::vector<double> capacity;
  // Per cell: whether its capacity is a memory cap below its device's
  // memory (messages then say so); empty: none is.
  std::vector<bool> capped;
  // Optional, with `memory`: a floor under it that never grows as a cell
  // shrinks (floor(a, b, k) <= memory(a, b, k), and no more for any
  // [a', b'] inside [a, b]). With it, MinMaxUnderMemory finds in L + K
  // tests that no partition fits where the floor alone allows none.
  std::function<double(int a, int b, int k)> memory_floor;
  std::vector<std::string> layer_names;  // for messages
  // Where nothing fits in memory, MinMaxUnderMemory says why (the layer that
  // fits nowhere, or the cell that overflows most in the fastest cut), at
  // O(K L) memory tests more; a caller that only counts failures (search)
  // sets this false and gets a short message.
  bool explain = true;

  // Cost of cell k holding layers a..b inclusive.
  double CellCost(int k, int a, int b) const {
    const auto& p = prefix[cell_class[k]];
    return p[b + 1] - p[a] + (b + 1 < num_layers ? cut_costs[cut_class[k]][b] : 0.0);
  }
};

// A problem with one device class, no cut costs and no memory limit.
PartitionProblem UniformProblem(const std::vector<double>& costs, int cells);

struct Partition {
  std::vector<int> first_layers;  // first layer of each cell; [0] = 0
  double bottleneck = 0;          // the largest cell cost
};

// Costs of each cell of a partition, and its largest.
std::vector<double> CellCosts(const PartitionProblem& p, const std::vector<int>& first_layers);

// Minimises the largest cell cost (the pipeline's bottleneck), exactly.
// Bisection on the bottleneck with a feasibility test per probe (about 60):
// for one device class without cut costs a greedy test, O(K log L); with
// heterogeneous devices or cut costs a sweep over reachable cell starts,
// O(K L).
Result<Partition> MinMax(const PartitionProblem& p);

// GPipe's heuristic made exact: minimises the variance of the cell costs
// (the sum of their squares, since the mean is fixed) by dynamic programming,
// O(K L^2).
Result<Partition> MinVariance(const PartitionProblem& p);

// MinMax subject to p.memory(a, b, k) <= p.capacity[k] for every cell; exact
// dynamic programming, O(K L^2) worst case with pruning. When nothing fits
// the error names the layer or the cell that cannot fit and by how much.
Result<Partition> MinMaxUnderMemory(const PartitionProblem& p);

// Checks an explicit list of first layers (one per cell, starting at 0,
// strictly increasing, below L); errors name the offending index.
Result<Partition> Manual(const PartitionProblem& p, const std::vector<int>& first_layers);

}  // namespace twinpipe::partition
