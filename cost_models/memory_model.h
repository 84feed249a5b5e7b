// Peak memory of a cell (consecutive layers) at a pipeline stage: parameters
// with gradients and optimizer state, the activations its micro-batches hold
// at the stage's peak, and the boundary buffers. The activations follow the
// one memory model, the per-op deltas the simulator charges
// (cost::MemoryAtStart / MemoryAtEnd in plan_costs.h): a schedule's stages
// are walked once with them (StagePeaks), and any cell's peak is then a few
// multiply-adds.
//
//   auto peaks = StagePeaks(schedule, ir::RecomputeMode::kFull);
//   CellMemory m = CellPeakMemory(model, cut_bytes, 0, 5, {12, 4, &peaks[0]});
#pragma once

#include <algorithm>
#include <vector>

#include "cost_models/model.h"
#include "ir/passes.h"
#include "ir/schedule.h"

namespace twinpipe::cost {

// What one micro-batch of a cell (layers first..last) holds per sample:
// everything its forward stashes, and what it keeps when recomputed (its
// boundary input and the activations of the layers its recompute does not
// re-run, a head; never more than keeping everything). `cut_bytes` is
// CutBytes(model).
struct CellActivations {
  double stash = 0;  // per sample, without recompute
  double kept = 0;   // per sample, with recompute
};
CellActivations CellActivationsOf(const Model& model, const std::vector<double>& cut_bytes, int first, int last);
// The same from sums already taken: the cell's stash, the stash of its
// layers recompute does not re-run, and its boundary input (per sample).
inline CellActivations CellActivationsFromSums(double stash, double not_rerun, double input) {
  return {stash, not_rerun > 0 ? std::min(stash, input + not_rerun) : input};
}

// The activation bytes a stage holds at its peak, for any cell placed there:
// the most, over the moments its memory rises, of `whole` micro-batches
// holding their whole activation and `kept` holding what recompute keeps.
struct StagePeak {
  struct Term {
    int whole = 0, kept = 0;
  };
  std::vector<Term> terms;  // none dominated by another
  double Bytes(double whole_bytes, double kept_bytes) const;
};

// Each stage's peak under a schedule (compute ops in program order, as
// ir::BuildShape makes them or with comm and R), charging the per-op deltas:
// F takes the whole activation and, when its (stage, micro-batch) is
// recomputed, keeps only the kept bytes at its end; R (the schedule's own,
// or the one ir::InsertRecompute puts before the backward) rebuilds the
// whole; B, or W after I, frees it (I frees nothing while the executors
// keep the whole activation until W).
std::vector<StagePeak> StagePeaks(const ir::Schedule& schedule, ir::RecomputeMode recompute);
// The same for a schedule built by name for K devices (per global stage, K x
// chunks of them). Names or shapes the builders refuse: GPipe's order (all M
// forwards, then the backwards, last first) for every stage.
std::vector<StagePeak> StagePeaks(const std::string& schedule, int devices, int micro_batches, int chunks,
                                  ir::RecomputeMode recompute);

struct MemoryInputs {
  double bytes_per_param = 12;       // weights + gradients + optimizer state
  double micro_batch = 1;            // samples per micro-batch
  const StagePeak* peak = nullptr;   // the stage's (StagePeaks); required
};

struct CellMemory {
  double params_bytes = 0;
  double activation_bytes = 0;   // at the stage's peak: stashed, kept and rebuilt by R
  double boundary_bytes = 0;     // activation and gradient buffers at both ends
  double total_bytes = 0;
};

// `cut_bytes` is CutBytes(model); the cell is layers first..last inclusive.
CellMemory CellPeakMemory(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                          const MemoryInputs& in);

// CellPeakMemory in O(1) per cell from prefix sums over the model's layers,
// for partitioners that ask about many cells (equal to it up to rounding).
//
//   CellMemoryTable table(model, cut_bytes);
//   double peak = table.Peak(0, 5, inputs).total_bytes;
class CellMemoryTable {
 public:
  CellMemoryTable(const Model& model, std::vector<double> cut_bytes);
  CellMemory Peak(int first, int last, const MemoryInputs& in) const;

 private:
  double input_bytes_;
  std::vector<double> cut_;
  std::vector<double> params_, stash_;  // prefix sums: [i] = layers 0..i-1
  std::vector<int> last_remat_;         // [i]: the last rematerialized layer < i, or -1
};

// Most micro-batches of each stage in flight (forward done, activations not
// yet freed by B or W) under a schedule: GPipe M, 1F1B min(K-s, M), naive 1.
std::vector<int> InFlightPerStage(const ir::Schedule& schedule);
// The same for a schedule built by name for K devices (per global stage, K x
// chunks of them). Names or shapes the builders refuse give M for every stage.
std::vector<int> InFlightPerStage(const std::string& schedule, int devices, int micro_batches, int chunks = 0);

}  // namespace twinpipe::cost
