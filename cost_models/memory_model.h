// Peak memory of a cell (consecutive layers) at a pipeline stage: parameters
// with gradients and optimizer state, the activations its micro-batches hold
// at the stage's peak, and the boundary buffers. The activations follow the
// one memory model, the per-op deltas the simulator charges
// (cost::MemoryAtStart / MemoryAtEnd in plan_costs.h): a schedule's stages
// are walked once with them (StagePeaks), and any cell's peak is then a few
// multiply-adds.
//
//   auto peaks = StagePeaks(schedule, ir::RecomputeMode::kFull);
//   CellMemory m = CellPeakMemory(model, cut_bytes, 0, 5, {}, {12, 4, &peaks[0]});
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "cost_models/model.h"
#include "ir/name_table.h"
#include "ir/passes.h"
#include "ir/schedule.h"

namespace twinpipe::cost {

// What a recompute keeps of a micro-batch, and what it rebuilds at once
// (`/pipeline/recompute_granularity`):
// - kCell (GPipe's, torchgpipe's): the cell keeps its boundary input from F
//   to its backward, and R rebuilds the whole cell's activations at once;
// - kLayer (Megatron-LM's `uniform` method with one layer per checkpoint):
//   every rematerialized layer keeps its input (on each GPU of a
//   tensor-parallel group without sequence parallelism, Layer::input_replicas),
//   and the layers are re-run one at a time inside the backward, so that
//   one layer's activations are live beside the kept inputs.
// R re-runs the same layers either way: only memory differs.
enum class RecomputeGranularity { kCell, kLayer };

inline constexpr ir::NameTable<RecomputeGranularity, 2> kRecomputeGranularityNames{{
    {"cell", RecomputeGranularity::kCell},
    {"layer", RecomputeGranularity::kLayer},
}};
constexpr std::string_view RecomputeGranularityName(RecomputeGranularity g) {
  return ir::NameOf(kRecomputeGranularityNames, g);
}
constexpr std::optional<RecomputeGranularity> RecomputeGranularityFromName(std::string_view name) {
  return ir::FromName(kRecomputeGranularityNames, name);
}

// How recompute keeps a micro-batch (a config's /pipeline/recompute_granularity
// and /pipeline/distribute_saved_activations).
struct Checkpointing {
  RecomputeGranularity granularity = RecomputeGranularity::kCell;
  // Megatron's `distribute_saved_activations`: a layer's kept input is split
  // across the tensor-parallel group that would each hold all of it (its
  // input_replicas), so each GPU keeps only the cut's share. Layer
  // granularity only; no effect with sequence parallelism (already split).
  bool distribute_saved_activations = false;
  bool operator==(const Checkpointing&) const = default;
};

// What one micro-batch of a cell (layers first..last) holds per sample:
// everything its forward stashes; what it keeps when recomputed (the kept
// inputs, and the activations of the layers its recompute does not re-run, a
// head; never more than keeping everything); and the most it holds while a
// recomputed forward runs or once R has rebuilt it (per cell: the whole
// stash; per layer: the kept bytes and the largest layer's activations
// beside them). `cut_bytes` is CutBytes(model).
struct CellActivations {
  double stash = 0;    // per sample, without recompute
  double kept = 0;     // per sample, with recompute, from F to R
  double rebuilt = 0;  // per sample, with recompute, while F runs and from R to the backward
};
CellActivations CellActivationsOf(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                                  const Checkpointing& checkpointing);
// The same from sums already taken: the cell's stash, the stash of its
// layers recompute does not re-run, its kept inputs (per cell: the boundary
// input; per layer: every re-run layer's) and, per layer only, the most any
// re-run layer adds to them while it is rebuilt (its stash less its kept
// input; none: per cell, the whole stash is rebuilt).
inline CellActivations CellActivationsFromSums(double stash, double not_rerun, double inputs,
                                               std::optional<double> layer_work = std::nullopt) {
  const double kept = not_rerun > 0 ? std::min(stash, inputs + not_rerun) : inputs;
  return {stash, kept, layer_work ? std::min(stash, kept + *layer_work) : stash};
}

// The activation bytes a stage holds at its peak, for any cell placed there:
// the most, over the moments its memory rises, of `whole` micro-batches
// holding their whole activation (not recomputed), `kept` holding what
// recompute keeps and `rebuilt` holding what a recomputed one holds at its
// most (CellActivations).
struct StagePeak {
  struct Term {
    int whole = 0, kept = 0, rebuilt = 0;
  };
  std::vector<Term> terms;  // none dominated by another
  double Bytes(double whole_bytes, double kept_bytes, double rebuilt_bytes) const;
};

// Each stage's peak under a schedule (compute ops in program order, as
// ir::BuildShape makes them or with comm and R), charging the per-op deltas:
// F takes the whole activation, or, when its (stage, micro-batch) is
// recomputed, the rebuilt bytes and keeps only the kept bytes at its end; R
// (the schedule's own, or the one ir::InsertRecompute puts before the
// backward) rebuilds them; B, or W after I, frees what the micro-batch
// holds (I frees nothing while the executors keep it until W). The same for
// every granularity: the bytes tell cell from layer.
std::vector<StagePeak> StagePeaks(const ir::Schedule& schedule, ir::RecomputeMode recompute);
// The same for a schedule built by name for K devices (per global stage, K x
// chunks of them). Names or shapes the builders refuse: GPipe's order (all M
// forwards, then the backwards, last first) for every stage.
std::vector<StagePeak> StagePeaks(const std::string& schedule, int devices, int micro_batches, int chunks,
                                  ir::RecomputeMode recompute);

// A cell's parameters as a GPU's static bytes depend on them: all of them
// (with the copies it keeps of weights a layer outside it holds:
// SharedWeightCopies), those of an MoE block's experts (sharded over their
// own data-parallel group), those of layers with FP8 GEMMs (Transformer
// Engine's FP8 copies) and the largest layer's (what fully sharded data
// parallelism gathers).
struct CellParams {
  double params = 0;
  double expert_params = 0;
  double fp8_params = 0;
  double largest_layer = 0;
  // Adds the layer's parameters (not its shared copies); returns its
  // forward FP8 GEMMs (one a linear), found on the same pass.
  int Add(const Layer& layer);
};
CellParams CellParamsOf(const Model& model, int first, int last, bool with_shared_copies = true);

// A GPU's weights, gradients and optimizer state for the parameters it
// holds (plan_costs.h's StaticBytesRule prices them as the plan does).
using StaticBytesRule = std::function<double(const CellParams&)>;

struct MemoryInputs {
  double bytes_per_param = 12;       // weights + gradients + optimizer state
  double micro_batch = 1;            // samples per micro-batch
  const StagePeak* peak = nullptr;   // the stage's (StagePeaks); required
  // The static bytes of the cell's parameters; none: params x bytes_per_param.
  const StaticBytesRule* static_bytes = nullptr;
};

struct CellMemory {
  double params_bytes = 0;
  double activation_bytes = 0;   // at the stage's peak: stashed, kept and rebuilt by R
  double boundary_bytes = 0;     // activation and gradient buffers at both ends
  double total_bytes = 0;
};

// `cut_bytes` is CutBytes(model); the cell is layers first..last inclusive.
CellMemory CellPeakMemory(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                          const Checkpointing& checkpointing, const MemoryInputs& in);

// CellPeakMemory in O(1) per cell from prefix sums over the model's layers
// (and, per layer, a sparse table of the layers' rebuilt bytes), for
// partitioners that ask about many cells (equal to it up to rounding).
//
//   CellMemoryTable table(model, cut_bytes, config.pipeline.checkpointing);
//   double peak = table.Peak(0, 5, inputs).total_bytes;
class CellMemoryTable {
 public:
  CellMemoryTable(const Model& model, std::vector<double> cut_bytes, const Checkpointing& checkpointing);
  CellMemory Peak(int first, int last, const MemoryInputs& in) const;
  // A floor under Peak's total that never grows as the cell shrinks: its
  // parameters without the copies of shared weights, its stash (per cell,
  // the same rebuilt and what recompute keeps at least), and the buffers of
  // the least input any cell can have. (The static bytes rule grows with
  // each of CellParams' fields.)
  double Floor(int first, int last, const MemoryInputs& in) const;

 private:
  double MostWork(int first, int end) const;  // the most of work_[0][first..end-1]

  bool per_layer_;
  double input_bytes_;
  double least_input_ = 0;  // the least of the model's input and the boundaries' bytes
  std::vector<double> cut_;
  double MostParams(int first, int end) const;  // the largest of layers first..end-1
  // Layers first..last's parameters, without the copies of shared weights.
  CellParams ParamsOf(int first, int last) const;

  struct Shared {
    int layer, of;
    double params;
  };
  std::vector<Shared> shared_;  // the layers that use another's weights (Layer::shares_weights_of)
  std::vector<double> params_, expert_params_, fp8_params_, stash_;  // prefix sums: [i] = layers 0..i-1
  std::vector<std::vector<double>> largest_;  // [k][i]: the largest layer of i..i+2^k-1
  std::vector<int> last_remat_;         // [i]: the last rematerialized layer < i, or -1
  // Per layer: prefix sums of the layers' kept inputs, and work_[k][i] the
  // most that layers i..i+2^k-1 add to them while rebuilt.
  std::vector<double> kept_inputs_;
  std::vector<std::vector<double>> work_;
};

// Most micro-batches of each stage in flight (forward done, activations not
// yet freed by B or W) under a schedule: GPipe M, 1F1B min(K-s, M), naive 1.
std::vector<int> InFlightPerStage(const ir::Schedule& schedule);
// The same for a schedule built by name for K devices (per global stage, K x
// chunks of them). Names or shapes the builders refuse give M for every stage.
std::vector<int> InFlightPerStage(const std::string& schedule, int devices, int micro_batches, int chunks = 0);

}  // namespace twinpipe::cost
