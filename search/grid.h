// The search's grid: every configuration it considers for a model on a
// number of GPUs (tensor-parallel degree and sequence parallelism, stages,
// replicas, micro-batches, schedule, chunks, recompute mode, partition
// algorithm), in a fixed order, and the cluster resized to those GPUs.
//
//   Result<cost::Config> work = ResizeCluster(config, 1024);
//   std::vector<Candidate> grid = Grid(*work, 1024, /*global_batch=*/512);
#pragma once

#include <cstdint>
#include <vector>

#include "cost_models/config.h"
#include "ir/result.h"
#include "search/search.h"

namespace twinpipe::search {

// The config on `devices` devices (0: as it is): a homogeneous cluster grows
// or shrinks; one listed device by device must keep its length (bad input).
Result<cost::Config> ResizeCluster(const cost::Config& config, int devices);

// Tensor-parallel degrees to try: t = 1, and for a transformer every t that
// divides the GPUs of a node (a group inside one node), the GPUs, the heads,
// the K/V heads, the FFN width and the vocabulary.
std::vector<int> TensorParallelDegrees(const cost::Config& config, int devices);

// The grid, in a fixed order (ties in the ranking go to the earlier point):
// by t (then sequence parallelism), K, many micro-batches first (small
// bubbles, good bounds early), schedule, chunks, recompute mode, partition
// algorithm. Each point keeps the global mini-batch (`batch` per replica).
std::vector<Candidate> Grid(const cost::Config& config, int devices, int64_t global_batch);

}  // namespace twinpipe::search
