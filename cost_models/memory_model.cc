#include "cost_models/memory_model.h"

#include <algorithm>
#include <bit>

#include "ir/builders.h"
#include "ir/in_flight.h"

namespace twinpipe::cost {

namespace {

// What a per-layer checkpoint keeps of layer i's input, per sample: the cut
// before it (the model's input before layer 0), held whole on each of its
// input_replicas GPUs unless the saved activations are distributed.
double KeptInput(const Model& model, const std::vector<double>& cut, int i, const Checkpointing& checkpointing) {
  const double in = i == 0 ? model.input_bytes : cut[i - 1];
  return checkpointing.distribute_saved_activations ? in : in * model.layers[i].input_replicas;
}

// What re-running layer i alone adds to the kept inputs: its activations
// less its kept input (which they include), none where the input is larger.
double LayerWork(const Model& model, const std::vector<double>& cut, int i, const Checkpointing& checkpointing) {
  return std::max(0.0, model.layers[i].stash_bytes - KeptInput(model, cut, i, checkpointing));
}

// A cell's memory from its parameters, what a micro-batch holds (per
// sample) and the boundary bytes in and out.
CellMemory FromSums(const CellParams& params, const CellActivations& held, double input, double output,
                    const MemoryInputs& in) {
  CellMemory m;
  const double b = in.micro_batch;
  m.params_bytes = in.static_bytes ? (*in.static_bytes)(params) : params.params * in.bytes_per_param;
  m.activation_bytes = in.peak->Bytes(held.stash * b, held.kept * b, held.rebuilt * b);
  m.boundary_bytes = 2 * (input + output) * b;  // activation and gradient, in and out
  m.total_bytes = m.params_bytes + m.activation_bytes + m.boundary_bytes;
  return m;
}

// Walks a schedule's stages with the per-op deltas, counting per stage the
// micro-batches that hold their whole activation, those that hold what
// recompute keeps and those a recompute has rebuilt (or whose recomputed
// forward runs), and keeps the counts at every rise.
class PeakWalk {
 public:
  PeakWalk(const ir::Schedule& s, ir::RecomputeMode recompute)
      : s_(s),
        recompute_(recompute),
        whole_(s.num_stages, 0),
        kept_(s.num_stages, 0),
        rebuilt_(s.num_stages, 0),
        peaks_(s.num_stages) {
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
  void Rise(int stage) { Add(peaks_[stage].terms, StagePeak::Term{whole_[stage], kept_[stage], rebuilt_[stage]}); }
  void Rebuild(int stage) {
    --kept_[stage], ++rebuilt_[stage];
    Rise(stage);
  }
  // The micro-batch's last backward frees what it holds.
  void Free(const ir::Op& op) { --(Recomputed(op) ? rebuilt_ : whole_)[op.stage]; }
  void Charge(const ir::Op& op) {
    const int st = op.stage;
    switch (op.kind) {
      case ir::OpKind::kForward:
        if (Recomputed(op)) {
          ++rebuilt_[st];
          Rise(st);
          --rebuilt_[st], ++kept_[st];
          Rise(st);  // a rise where the kept bytes exceed the rebuilt (a large input)
        } else {
          ++whole_[st];
          Rise(st);
        }
        break;
      case ir::OpKind::kRecompute:
        Rebuild(st);
        break;
      case ir::OpKind::kBackward:
      case ir::OpKind::kBackwardInput:
        if (Recomputed(op) && !HasOwnRecompute(op)) Rebuild(st);  // the R InsertRecompute puts before it
        if (op.kind == ir::OpKind::kBackward) Free(op);
        break;
      case ir::OpKind::kBackwardWeight:
        Free(op);
        break;
      default:
        break;
    }
  }
  // Adds a term unless another holds at least as much of each; drops those it holds more than.
  static bool Covers(const StagePeak::Term& a, const StagePeak::Term& b) {
    return a.whole >= b.whole && a.kept >= b.kept && a.rebuilt >= b.rebuilt;
  }
  static void Add(std::vector<StagePeak::Term>& terms, StagePeak::Term t) {
    for (const auto& u : terms) {
      if (Covers(u, t)) return;
    }
    std::erase_if(terms, [&](const StagePeak::Term& u) { return Covers(t, u); });
    terms.push_back(t);
  }

  const ir::Schedule& s_;
  ir::RecomputeMode recompute_;
  std::vector<char> has_recompute_;  // [stage x M + micro-batch]: the schedule has its R
  std::vector<int> whole_, kept_, rebuilt_;
  std::vector<StagePeak> peaks_;
};

}  // namespace

CellActivations CellActivationsOf(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                                  const Checkpointing& checkpointing) {
  double stash = 0, not_rerun = 0;
  const int end = RematerializedEnd(model, first, last);
  for (int i = first; i <= last; ++i) {
    stash += model.layers[i].stash_bytes;
    if (i >= end) not_rerun += model.layers[i].stash_bytes;
  }
  if (checkpointing.granularity == RecomputeGranularity::kCell) {
    return CellActivationsFromSums(stash, not_rerun, first == 0 ? model.input_bytes : cut_bytes[first - 1]);
  }
  double inputs = 0, work = 0;
  for (int i = first; i < end; ++i) {
    inputs += KeptInput(model, cut_bytes, i, checkpointing);
    work = std::max(work, LayerWork(model, cut_bytes, i, checkpointing));
  }
  return CellActivationsFromSums(stash, not_rerun, inputs, work);
}

CellMemory CellPeakMemory(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                          const Checkpointing& checkpointing, const MemoryInputs& in) {
  const double input = first == 0 ? model.input_bytes : cut_bytes[first - 1];
  const double output = last + 1 < static_cast<int>(model.layers.size()) ? cut_bytes[last] : 0;
  return FromSums(CellParamsOf(model, first, last), CellActivationsOf(model, cut_bytes, first, last, checkpointing),
                  input, output, in);
}

int CellParams::Add(const Layer& layer) {
  int fp8_linears = 0;
  bool fp8 = false;
  for (const Kernel& k : layer.kernels) {
    fp8 = fp8 || k.fp8;
    fp8_linears += k.fp8 && k.gemm && k.pass == Kernel::Pass::kForward;
  }
  params += layer.params;
  expert_params += layer.expert_params;
  if (fp8) fp8_params += layer.params;
  largest_layer = std::max(largest_layer, layer.params);
  return fp8_linears;
}

CellParams CellParamsOf(const Model& model, int first, int last, bool with_shared_copies) {
  CellParams p;
  if (with_shared_copies) p.params = SharedWeightCopies(model.layers, first, last);
  for (int i = first; i <= last; ++i) p.Add(model.layers[i]);
  return p;
}

double StagePeak::Bytes(double whole_bytes, double kept_bytes, double rebuilt_bytes) const {
  double most = 0;
  if (rebuilt_bytes == whole_bytes) {  // per cell: R rebuilds the whole
    for (const Term& t : terms) most = std::max(most, (t.whole + t.rebuilt) * whole_bytes + t.kept * kept_bytes);
    return most;
  }
  for (const Term& t : terms) {
    most = std::max(most, t.whole * whole_bytes + t.kept * kept_bytes + t.rebuilt * rebuilt_bytes);
  }
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

CellMemoryTable::CellMemoryTable(const Model& model, std::vector<double> cut_bytes, const Checkpointing& checkpointing)
    : per_layer_(checkpointing.granularity == RecomputeGranularity::kLayer),
      input_bytes_(model.input_bytes),
      cut_(std::move(cut_bytes)) {
  const size_t L = model.layers.size();
  params_.assign(L + 1, 0.0);
  expert_params_.assign(L + 1, 0.0);
  fp8_params_.assign(L + 1, 0.0);
  stash_.assign(L + 1, 0.0);
  last_remat_.assign(L + 1, -1);
  largest_.emplace_back(L, 0.0);
  for (size_t i = 0; i < L; ++i) {
    const Layer& layer = model.layers[i];
    params_[i + 1] = params_[i] + layer.params;
    expert_params_[i + 1] = expert_params_[i] + layer.expert_params;
    CellParams one;
    one.Add(layer);
    fp8_params_[i + 1] = fp8_params_[i] + one.fp8_params;
    largest_[0][i] = layer.params;
    if (layer.shares_weights_of >= 0) shared_.push_back({static_cast<int>(i), layer.shares_weights_of, layer.shared_params});
    stash_[i + 1] = stash_[i] + model.layers[i].stash_bytes;
    last_remat_[i + 1] = model.layers[i].rematerialized ? static_cast<int>(i) : last_remat_[i];
  }
  least_input_ = input_bytes_;
  for (size_t j = 0; j + 1 < L; ++j) least_input_ = std::min(least_input_, cut_[j]);
  for (size_t span = 2; span <= L; span *= 2) {
    const std::vector<double>& half = largest_.back();
    std::vector<double> next(L - span + 1);
    for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(half[i], half[i + span / 2]);
    largest_.push_back(std::move(next));
  }
  if (!per_layer_) return;
  kept_inputs_.assign(L + 1, 0.0);
  work_.emplace_back(L, 0.0);
  for (size_t i = 0; i < L; ++i) {
    const int layer = static_cast<int>(i);
    kept_inputs_[i + 1] = kept_inputs_[i] + KeptInput(model, cut_, layer, checkpointing);
    work_[0][i] = LayerWork(model, cut_, layer, checkpointing);
  }
  for (size_t span = 2; span <= L; span *= 2) {
    const std::vector<double>& half = work_.back();
    std::vector<double> next(L - span + 1);
    for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(half[i], half[i + span / 2]);
    work_.push_back(std::move(next));
  }
}

double CellMemoryTable::MostParams(int first, int end) const {
  if (end <= first) return 0;
  const int k = std::bit_width(static_cast<unsigned>(end - first)) - 1;  // 2^k <= end - first
  return std::max(largest_[k][first], largest_[k][end - (1 << k)]);
}

double CellMemoryTable::MostWork(int first, int end) const {
  if (end <= first) return 0;
  const int k = std::bit_width(static_cast<unsigned>(end - first)) - 1;  // 2^k <= end - first
  return std::max(work_[k][first], work_[k][end - (1 << k)]);
}

CellParams CellMemoryTable::ParamsOf(int first, int last) const {
  return {.params = params_[last + 1] - params_[first],
          .expert_params = expert_params_[last + 1] - expert_params_[first],
          .fp8_params = fp8_params_[last + 1] - fp8_params_[first],
          .largest_layer = MostParams(first, last + 1)};
}

CellMemory CellMemoryTable::Peak(int first, int last, const MemoryInputs& in) const {
  // RematerializedEnd: past the cell's last rematerialized layer, or its first.
  const int end = std::max(first, last_remat_[last + 1] + 1);
  const double input = first == 0 ? input_bytes_ : cut_[first - 1];
  const double output = last + 1 < static_cast<int>(params_.size()) - 1 ? cut_[last] : 0;
  const double stash = stash_[last + 1] - stash_[first], not_rerun = stash_[last + 1] - stash_[end];
  const CellActivations held =
      per_layer_
          ? CellActivationsFromSums(stash, not_rerun, kept_inputs_[end] - kept_inputs_[first], MostWork(first, end))
          : CellActivationsFromSums(stash, not_rerun, input);
  double copies = 0;
  for (const Shared& sh : shared_) {
    if (HoldsSharedCopy(sh.layer, sh.of, first, last)) copies += sh.params;
  }
  CellParams params = ParamsOf(first, last);
  params.params += copies;
  return FromSums(params, held, input, output, in);
}

double CellMemoryTable::Floor(int first, int last, const MemoryInputs& in) const {
  const double stash = stash_[last + 1] - stash_[first];
  const CellParams params = ParamsOf(first, last);
  // Every cell's input is a boundary or the model's input: at least the
  // least of them, which per cell is what recompute keeps at least.
  const CellActivations held{stash, per_layer_ ? 0 : std::min(stash, least_input_), per_layer_ ? 0 : stash};
  return FromSums(params, held, least_input_, 0, in).total_bytes;
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
