// The search's grid: every configuration it considers for a model on a
// number of GPUs (tensor-parallel degree, sequence parallelism and its
// overlap, context-parallel degree, stages, replicas, micro-batches,
// schedule, chunks, recompute mode, data-parallel sharding, partition
// algorithm), in a fixed order, and the cluster resized to those GPUs.
//
//   Result<cost::Config> work = ResizeCluster(config, 1024);
//   std::vector<Candidate> grid = Grid(*work, 1024, /*global_batch=*/512, SearchOptions{});
#pragma once

#include <cstdint>
#include <string>
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
// the K/V heads, the FFN width (and the experts' FFN width) and the vocabulary.
std::vector<int> TensorParallelDegrees(const cost::Config& config, int devices);

// Context-parallel degrees to try with t-GPU tensor-parallel groups: c = 1,
// and for a transformer with fused attention on one device kind every c
// dividing devices / t that splits the sequence into equal chunks (2c of
// them when causal, c otherwise), within the options' limits
// (max_context_parallel, min_context_tokens).
std::vector<int> ContextParallelDegrees(const cost::Config& config, int devices, int t, const SearchOptions& options);

// Expert-parallel degrees to try for a mixture of experts whose stages
// each take `stage_gpus` GPUs (t x c x replicas) with t-GPU tensor-parallel
// groups: every e dividing the experts such that e expert-parallel groups
// of et GPUs each (the config's expert_tensor_parallel, else t) divide the
// stage's GPUs, as Megatron-Core folds expert parallelism into the data
// parallelism. {1} for a dense model; empty when the config's et does not
// divide t (no such layout).
std::vector<int> ExpertParallelDegrees(const cost::Config& config, int t, int stage_gpus);

// Chunks per device a schedule tries on K pipeline devices: its own choices
// (ir::ChunkChoices) and, for the interleaved schedule, every v > 1 dividing
// the blocks per device (Megatron's rule: the generator's blocks, or the
// layers of another model, over K), each with K x v at most the layers and
// v at most options.max_chunks (0: no limit). Ascending.
std::vector<int> ChunkChoices(const cost::Config& config, const std::string& schedule, int K,
                              const SearchOptions& options);

// The grid, in a fixed order (ties in the ranking go to the earlier point):
// by t (then sequence parallelism and its overlap), c, K, e, many micro-batches
// first (small bubbles, good bounds early), schedule, chunks, recompute
// mode, sharding, partition algorithm. Each point keeps the global
// mini-batch (`batch` per replica). Sharding other than none only where a
// gradient has more than one rank (R c > 1), overlap only with sequence
// parallelism.
std::vector<Candidate> Grid(const cost::Config& config, int devices, int64_t global_batch,
                            const SearchOptions& options);

// Why Grid is empty, as a sentence naming the config: the t x c x K x R
// splits of the GPUs it allows and the most GPUs those can use, or that
// no split of `devices` suits the schedules or the experts.
std::string WhyNoConfiguration(const cost::Config& config, int devices, int64_t global_batch,
                               const SearchOptions& options);

}  // namespace twinpipe::search
