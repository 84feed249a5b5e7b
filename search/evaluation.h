// Evaluating a grid point: its settings written into a scratch config, its
// compute-only shape, its partition and cost table, and its plan built and
// simulated. Each part is computed once and shared by the points that have
// it alike (a shape per schedule, K, M and chunks; a cut per CutKey; a
// simulation per plan), so a grid of tens of thousands of points builds
// and simulates a few hundred plans.
//
//   Evaluator evaluator(std::move(work), /*cap=*/0, /*calibration=*/nullptr);
//   std::optional<Candidate> c = evaluator.Simulate(point);  // c->throughput, c->peak_memory_bytes, c->fits
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cost_models/config.h"
#include "cost_models/memory_model.h"
#include "cost_models/plan.h"
#include "ir/schedule.h"
#include "search/search.h"
#include "simulate/calibration.h"
#include "simulate/engine.h"

namespace twinpipe::search {

// A compute-only schedule, its in-flight counts and activation peaks and, per device, the stage
// whose input gradient its last compute op makes (-1: it makes none).
struct Shape {
  ir::Schedule schedule;
  std::vector<int> in_flight;        // most micro-batches each stage holds
  // Each stage's activation peak, per recompute mode (cost::StagePeaks):
  // what the `memory` partition plans with.
  std::array<std::vector<cost::StagePeak>, 4> peaks;
  std::vector<int> least_in_flight;  // what the peak is at least (auto: 1; it fits its cap)
  std::vector<int> last_backward_stage;
  // Per stage, how many of each compute op kind (by ComputeSlot) it runs;
  // and whether its backwards are B's, I's or both.
  std::vector<std::array<int, 5>> ops;
  std::vector<char> has_whole, has_input;
  int cut_class = 0;  // shapes with equal placement and peaks are cut alike
  bool paired = false;  // some F and B run overlapped (ir::Op::paired)
};

// A partition and the costs of the plans it makes (which read only the
// cells and the placement), shared by the points whose cut cannot differ.
struct Cut {
  cost::Plan skeleton;  // the partition, and the schedule's placement without programs
  simulate::PlanCosts costs;
};

// The model's costs a grid point sets (SetParallelism's inputs): points
// with equal ones share the generated model.
struct ModelKey {
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  bool tp_comm_overlap = false;
  int context_parallel = 1;
  bool selective = false;
  int expert_parallel = 1;
  auto operator<=>(const ModelKey&) const = default;
};
ModelKey ModelOf(const Candidate& c);

// The schedule-shape part of a grid point, its model, sharding and its cut:
// points with equal keys have the same plan, costs and so simulation.
using PlanKey = std::tuple<int, int, int, std::string, int, int, ModelKey, int, std::vector<int>>;
PlanKey KeyOf(const Candidate& c, const Cut& cut);

class Evaluator {
 public:
  Evaluator(cost::Config work, double memory_cap_bytes, const simulate::Calibration* fitted)
      : cap(memory_cap_bytes), calibration(fitted), work_(std::move(work)) {
    // The memory partition cuts to the search's cap (the devices' memory
    // where less); without one, to the config's, as the auto schedule plans
    // to it and the config written for a point keeps it. Constant for the
    // evaluator's life: the cached cuts assume it.
    if (cap > 0) work_.pipeline.memory_cap = cap;
  }

  // The search's settings: bytes a device may hold (0: each its own
  // memory), and fitted costs in place of the catalogue's (or null).
  const double cap;
  const simulate::Calibration* const calibration;

  // The scratch config: the last Use'd point's settings on the searched
  // cluster. MaxLayers regenerates its model (then ForgetTheModel).
  cost::Config& work() { return work_; }
  const cost::Config& work() const { return work_; }
  // Bytes device d may hold: its memory, or the cap where lower.
  double Limit(int device) const;

  // Writes the point's settings into the scratch config.
  void Use(const Candidate& c);
  // The point's compute-only shape (built once per schedule, K, M and
  // chunks); null when the schedule refuses it.
  const Shape* ShapeOf(const Candidate& c);
  // The point's partition and costs (Use(c) first), computed once per cut
  // key (a partition once per FirstsKey, a time-balancing one once per
  // TimeCutKey, a report and costs once per DescribedKey); null when no
  // partition exists.
  const Cut* CutOf(const Candidate& c, const Shape& shape);
  // Plans and simulates the point (once per distinct plan): its step time,
  // throughput, bubble, peak and whether it fits. Nothing that fails here is
  // the user's fault: a memory partition that cannot fit, or a shape the
  // schedule refuses, drops the point (nothing).
  std::optional<Candidate> Simulate(Candidate c);
  // Plans simulated so far.
  int64_t simulated() const { return simulated_; }
  // The model changed under the keys (MaxLayers regenerates it).
  void ForgetTheModel();

 private:
  // Where a partition cuts depends on the model (tensor, sequence and
  // context parallelism, overlap), recompute, the replica's batch and
  // micro-batches (with the model, the gradient's ranks), the algorithm,
  // the shape's class (its placement and activation peaks: see Shape) and,
  // for the memory partition, the sharding (the static bytes it fits);
  // -1 for the others, which read no memory.
  using FirstsKey = std::tuple<ModelKey, int, int64_t, int, cost::PartitionAlgorithm, int, int>;
  // What a cut (its partition and costs) depends on: a FirstsKey's and the
  // sharding (the costs' static bytes, step and FSDP's gathers).
  using CutKey = std::tuple<FirstsKey, int>;
  // What a time-balancing cut (gpipe, minmax) depends on: the layers' times
  // and the cuts' transfers, that is the model, whether R runs (none, full
  // or except-last, selective), the micro-batch size and the placement; not
  // the in-flight counts or the memory.
  using TimeCutKey = std::tuple<ModelKey, int, int64_t, cost::PartitionAlgorithm, std::vector<int>>;
  // What a cut's report and costs read: a CutKey's but the algorithm, and the
  // cells (algorithms that cut alike share them).
  using DescribedKey = std::tuple<ModelKey, int, int64_t, int, int, int, std::vector<int>>;
  // What the search keeps from simulating a plan.
  struct Outcome {
    double step_time_s = 0, bubble_fraction = 0;
    std::vector<double> peaks;  // per device
  };

  cost::Config work_;
  std::map<std::tuple<std::string, int, int, int>, std::optional<Shape>> shapes_;  // by (schedule, K, M, chunks)
  std::map<std::pair<std::vector<int>, std::vector<int>>, int> cut_classes_;      // (placement, in flight)
  std::map<FirstsKey, std::optional<std::vector<int>>> firsts_;  // first layers; nothing: no partition exists
  std::map<CutKey, std::shared_ptr<const Cut>> cuts_;  // null: no partition exists
  std::map<TimeCutKey, std::optional<std::vector<int>>> time_cuts_;  // first layers; nothing: none
  std::map<DescribedKey, std::shared_ptr<const Cut>> described_;
  std::map<PlanKey, Outcome> memo_;
  int64_t simulated_ = 0;
};

}  // namespace twinpipe::search
