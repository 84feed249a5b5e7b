// `twinpipe search`: which tensor-parallel degree (and sequence
// parallelism, and its overlap with the GEMMs), context-parallel degree,
// stages, replicas, micro-batches, schedule, chunks, recompute mode
// (selective too, for transformers), data-parallel sharding and partition
// algorithm to run, by simulating every point of the grid; and how deep a
// generator model can grow before it no longer fits (GPipe's Table 1).
//
//   SearchOptions o{.devices = 8};
//   Result<SearchResult> r = Search(config, o);
//   r->best->throughput; r->pareto.size();
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost_models/config.h"
#include "ir/result.h"
#include "simulate/calibration.h"

namespace twinpipe::search {

enum class Objective { kThroughput, kMemory };

struct SearchOptions {
  int devices = 0;                 // 0: the config's cluster size
  double memory_cap_bytes = 0;     // 0: each device's own memory
  Objective objective = Objective::kThroughput;
  // Called now and then with (evaluated, total): for a progress bar.
  std::function<void(int64_t, int64_t)> progress;
  // Tests: simulate every point, skip none, and fail (runtime error) if a
  // simulation beats its point's bounds (the bounds would then be wrong).
  bool check_bounds = false;
  // Fitted costs (`twinpipe calibrate`) in place of the catalogue's, for the
  // bounds and the simulations alike; not owned.
  const simulate::Calibration* calibration = nullptr;

  // What the grid spans of the newer knobs (each also limited by the model
  // and the cluster: see Grid).
  // Context-parallel degrees c: at most max_context_parallel (0: no limit),
  // and each GPU keeping at least min_context_tokens of a sample's sequence
  // (seq / c; 0: no limit). The default tries c only where the sequence is
  // long (c = 2 from 8,192 tokens), as it is run, and keeps the searches of
  // short sequences as they were.
  int max_context_parallel = 0;
  int min_context_tokens = 4096;
  // Data-parallel sharding modes, tried where a gradient has more than one
  // rank (replicas x c > 1).
  std::vector<cost::DataParallelSharding> shardings{cost::DataParallelSharding::kNone,
                                                    cost::DataParallelSharding::kOptimizer,
                                                    cost::DataParallelSharding::kFull};
  // Tensor-parallel overlap settings, tried where sequence parallelism runs.
  std::vector<bool> tp_comm_overlap{false, true};
  // The most chunks per device an interleaved schedule takes (0: every v
  // that divides the blocks per device, up to the layers).
  int max_chunks = 0;
};

// One point of the grid and what the simulator predicts for it.
struct Candidate {
  int stages = 1;          // K: pipeline devices (each t x c GPUs)
  int replicas = 1;        // data-parallel copies: GPUs / (t c K)
  int tensor_parallel = 1; // t (transformers)
  bool sequence_parallel = false;
  bool tp_comm_overlap = false;  // sequence parallelism's collectives beside their GEMMs
  int context_parallel = 1;      // c (fused attention)
  int expert_parallel = 1;       // e (mixtures of experts): GPUs the experts are divided over
  cost::DataParallelSharding sharding = cost::DataParallelSharding::kNone;
  int micro_batches = 1;   // M
  std::string schedule;
  int chunks = 1;          // stages per device
  ir::RecomputeMode recompute = ir::RecomputeMode::kNone;
  cost::PartitionAlgorithm partition = cost::PartitionAlgorithm::kMinMax;
  int64_t batch = 1;       // per replica (the global mini-batch stays the config's)
  double step_time_s = 0;
  double throughput = 0;   // samples per second, all replicas
  double bubble_fraction = 0;
  double peak_memory_bytes = 0;  // the fullest device's
  bool fits = false;             // every device within the cap
};

struct SearchResult {
  int64_t configs_evaluated = 0;  // grid points considered
  int64_t configs_simulated = 0;  // of those, plans simulated (points with equal plans share one)
  int64_t configs_bounded = 0;    // of those, skipped: a fitting point beats their bounds on both axes
  int64_t over_cap = 0;           // dropped for memory (or a memory partition that cannot fit)
  double wall_s = 0;
  std::vector<Candidate> pareto;  // throughput against peak memory, fastest first
  std::optional<Candidate> best;  // by the objective; none when nothing fits
};

// Bad options (devices that the cluster cannot take) are bad input.
Result<SearchResult> Search(const cost::Config& config, const SearchOptions& options);

// The config itself as a point of the grid: every knob a Candidate has, as
// the config sets it (its predictions left 0). Code that varies some knobs
// of a config starts from it, so that the rest stay the config's.
Candidate CandidateOf(const cost::Config& config);

// The config's JSON with the candidate's pipeline, training and cluster
// settings written in: a config `simulate` and `execute` run as is. An
// `auto` candidate, or one cut by the memory partition, found under a
// memory cap (bytes, 0: none) carries it as /pipeline/memory_cap, so that
// it plans the same schedule and cut again.
nlohmann::ordered_json CandidateConfig(const nlohmann::ordered_json& original, const Candidate& candidate,
                                       int devices, double memory_cap = 0);

struct MaxLayersRow {
  int stages = 1;
  ir::RecomputeMode recompute = ir::RecomputeMode::kNone;
  int max_layers = 0;              // the generator's layer count; 0 when none fits
  double peak_memory_bytes = 0;    // at max_layers: the fullest device's
};

// For each K dividing the devices (one replica per K devices) and recompute
// none and full, with the config's schedule and micro-batches: the largest
// layer count (at most 65536) whose simulated peak stays within every
// device's memory and the cap, cut by minmax or, where that overflows, by the
// memory-aware partition (models up to 2048 layers). Needs a generator model.
Result<std::vector<MaxLayersRow>> MaxLayers(const cost::Config& config, const SearchOptions& options);

}  // namespace twinpipe::search
