#include "cost_models/memory_model.h"

#include <algorithm>

#include "ir/builders.h"
#include "ir/in_flight.h"

namespace twinpipe::cost {

namespace {

// A cell's memory from its sums: parameters, stash, the stash its recompute
// does not rebuild, and the boundary bytes in and out.
CellMemory FromSums(double params, double stash, double not_rerun, double input, double output,
                    const MemoryInputs& in) {
  CellMemory m;
  const double b = in.micro_batch;
  m.params_bytes = params * in.bytes_per_param;
  m.activation_bytes = in.peak->Bytes(stash * b, CellActivationsFromSums(stash, not_rerun, input).kept * b);
  m.boundary_bytes = 2 * (input + output) * b;  // activation and gradient, in and out
  m.total_bytes = m.params_bytes + m.activation_bytes + m.boundary_bytes;
  return m;
}

// Walks a schedule's stages with the per-op deltas, counting per stage the
// micro-batches that hold their whole activation and those that hold what
// recompute keeps, and keeps the counts at every rise.
class PeakWalk {
 public:
  PeakWalk(const ir::Schedule& s, ir::RecomputeMode recompute)
      : s_(s), recompute_(recompute), whole_(s.num_stages, 0), kept_(s.num_stages, 0), peaks_(s.num_stages) {
    for (const auto& program : s.programs) {
      for (const ir::Op& op : program) {
        if (op.kind != ir::OpKind::kRecompute) continue;
        if (has_recompute_.empty()) has_recompute_.assign(static_cast<size_t>(s.num_stages) * s.num_micro_batches, 0);
        has_recompute_[Index(op)] = 1;
      }
    }
  }

  std::vector<StagePeak> Run() {
    for (const auto& program : s_.programs) {
      for (const ir::Op& op : program) {
        if (op.stage >= 0 && op.stage < s_.num_stages) Charge(op);
      }
    }
    return std::move(peaks_);
  }

 private:
  size_t Index(const ir::Op& op) const {
    return static_cast<size_t>(op.stage) * s_.num_micro_batches + op.micro_batch;
  }
  bool HasOwnRecompute(const ir::Op& op) const { return !has_recompute_.empty() && has_recompute_[Index(op)]; }
  // As the engines' dependencies decide (ir::Dependencies::Recomputed) once
  // ir::InsertRecompute has run.
  bool Recomputed(const ir::Op& op) const {
    if (HasOwnRecompute(op)) return true;
    return ir::InsertsRecompute(recompute_) &&
           !(recompute_ == ir::RecomputeMode::kExceptLast && op.micro_batch == s_.num_micro_batches - 1);
  }
  void Rise(int stage) { Add(peaks_[stage].terms, StagePeak::Term{whole_[stage], kept_[stage]}); }
  void Rebuild(int stage) {
    --kept_[stage], ++whole_[stage];
    Rise(stage);
  }
  void Charge(const ir::Op& op) {
    const int st = op.stage;
    switch (op.kind) {
      case ir::OpKind::kForward:
        ++whole_[st];
        Rise(st);
        if (Recomputed(op)) {
          --whole_[st], ++kept_[st];
          Rise(st);  // a rise where the kept bytes exceed the whole (a large input)
        }
        break;
      case ir::OpKind::kRecompute:
        Rebuild(st);
        break;
      case ir::OpKind::kBackward:
      case ir::OpKind::kBackwardInput:
        if (Recomputed(op) && !HasOwnRecompute(op)) Rebuild(st);  // the R InsertRecompute puts before it
        if (op.kind == ir::OpKind::kBackward) --whole_[st];
        break;
      case ir::OpKind::kBackwardWeight:
        --whole_[st];
        break;
      default:
        break;
    }
  }
  // Adds a term unless another holds at least as much of both; drops those it holds more than.
  static void Add(std::vector<StagePeak::Term>& terms, StagePeak::Term t) {
    for (const auto& u : terms) {
      if (u.whole >= t.whole && u.kept >= t.kept) return;
    }
    std::erase_if(terms, [&](const StagePeak::Term& u) { return t.whole >= u.whole && t.kept >= u.kept; });
    terms.push_back(t);
  }

  const ir::Schedule& s_;
  ir::RecomputeMode recompute_;
  std::vector<char> has_recompute_;  // [stage x M + micro-batch]: the schedule has its R
  std::vector<int> whole_, kept_;
  std::vector<StagePeak> peaks_;
};

}  // namespace

CellActivations CellActivationsOf(const Model& model, const std::vector<double>& cut_bytes, int first, int last) {
  double stash = 0, not_rerun = 0;
  const int end = RematerializedEnd(model, first, last);
  for (int i = first; i <= last; ++i) {
    stash += model.layers[i].stash_bytes;
    if (i >= end) not_rerun += model.layers[i].stash_bytes;
  }
  return CellActivationsFromSums(stash, not_rerun, first == 0 ? model.input_bytes : cut_bytes[first - 1]);
}

CellMemory CellPeakMemory(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                          const MemoryInputs& in) {
  double params = 0, stash = 0, not_rerun = 0;
  const int end = RematerializedEnd(model, first, last);
  for (int i = first; i <= last; ++i) {
    params += model.layers[i].params;
    stash += model.layers[i].stash_bytes;
    if (i >= end) not_rerun += model.layers[i].stash_bytes;
  }
  const double input = first == 0 ? model.input_bytes : cut_bytes[first - 1];
  const double output = last + 1 < static_cast<int>(model.layers.size()) ? cut_bytes[last] : 0;
  return FromSums(params, stash, not_rerun, input, output, in);
}

double StagePeak::Bytes(double whole_bytes, double kept_bytes) const {
  double most = 0;
  for (const Term& t : terms) most = std::max(most, t.whole * whole_bytes + t.kept * kept_bytes);
  return most;
}

std::vector<StagePeak> StagePeaks(const ir::Schedule& schedule, ir::RecomputeMode recompute) {
  return PeakWalk(schedule, recompute).Run();
}

std::vector<StagePeak> StagePeaks(const std::string& schedule, int devices, int micro_batches, int chunks,
                                  ir::RecomputeMode recompute) {
  auto built = ir::BuildShape(schedule, devices, micro_batches, chunks);
  if (built) return StagePeaks(*built, recompute);
  const int stages = devices * std::max(1, chunks > 0 ? chunks : ir::DefaultChunks(schedule));
  ir::Schedule gpipe{stages, micro_batches, stages, 1, {}, {}};
  for (int st = 0; st < stages; ++st) {
    gpipe.placement.push_back(st);
    auto& program = gpipe.programs.emplace_back();
    for (int m = 0; m < micro_batches; ++m) {
      program.push_back(ir::Op{.kind = ir::OpKind::kForward, .device = st, .stage = st, .micro_batch = m});
    }
    for (int m = micro_batches - 1; m >= 0; --m) {
      program.push_back(ir::Op{.kind = ir::OpKind::kBackward, .device = st, .stage = st, .micro_batch = m});
    }
  }
  return StagePeaks(gpipe, recompute);
}

CellMemoryTable::CellMemoryTable(const Model& model, std::vector<double> cut_bytes)
    : input_bytes_(model.input_bytes), cut_(std::move(cut_bytes)) {
  const size_t L = model.layers.size();
  params_.assign(L + 1, 0.0);
  stash_.assign(L + 1, 0.0);
  last_remat_.assign(L + 1, -1);
  for (size_t i = 0; i < L; ++i) {
    params_[i + 1] = params_[i] + model.layers[i].params;
    stash_[i + 1] = stash_[i] + model.layers[i].stash_bytes;
    last_remat_[i + 1] = model.layers[i].rematerialized ? static_cast<int>(i) : last_remat_[i];
  }
}

CellMemory CellMemoryTable::Peak(int first, int last, const MemoryInputs& in) const {
  // RematerializedEnd: past the cell's last rematerialized layer, or its first.
  const int end = std::max(first, last_remat_[last + 1] + 1);
  const double input = first == 0 ? input_bytes_ : cut_[first - 1];
  const double output = last + 1 < static_cast<int>(params_.size()) - 1 ? cut_[last] : 0;
  return FromSums(params_[last + 1] - params_[first], stash_[last + 1] - stash_[first], stash_[last + 1] - stash_[end],
                  input, output, in);
}

std::vector<int> InFlightPerStage(const ir::Schedule& s) {
  ir::InFlightCounter in_flight(s.num_stages);
  for (const auto& program : s.programs) {
    for (const ir::Op& op : program) in_flight.Ended(op);
  }
  return in_flight.TakePeak();
}

std::vector<int> InFlightPerStage(const std::string& schedule, int devices, int micro_batches, int chunks) {
  auto built = ir::BuildShape(schedule, devices, micro_batches, chunks);
  if (!built) {
    return std::vector<int>(static_cast<size_t>(devices) * std::max(1, chunks > 0 ? chunks : ir::DefaultChunks(schedule)),
                            micro_batches);
  }
  return InFlightPerStage(*built);
}

}  // namespace twinpipe::cost
