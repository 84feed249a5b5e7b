#include "cost_models/memory_model.h"

#include <algorithm>

#include "ir/builders.h"

namespace twinpipe::cost {

namespace {

// A cell's memory from its sums: parameters, stash, the stash its recompute
// does not rebuild, and the boundary bytes in and out.
CellMemory FromSums(double params, double stash, double not_rerun, double input, double output,
                    const MemoryInputs& in) {
  CellMemory m;
  const double kept = CellActivationsFromSums(stash, not_rerun, input).kept;
  const double b = in.micro_batch;
  m.params_bytes = params * in.bytes_per_param;
  switch (in.recompute) {
    case ir::RecomputeMode::kNone:
    case ir::RecomputeMode::kSelective:  // the layers' stash is already the selective one
      m.stash_bytes = in.in_flight * stash * b;
      break;
    case ir::RecomputeMode::kFull:
      m.stash_bytes = in.in_flight * kept * b;
      m.working_bytes = (stash - kept) * b;
      break;
    case ir::RecomputeMode::kExceptLast:
      // One micro-batch keeps everything; the others keep their input.
      m.stash_bytes = (in.in_flight - 1) * kept * b + stash * b;
      m.working_bytes = in.in_flight > 1 ? stash * b : 0;
      break;
  }
  m.boundary_bytes = 2 * (input + output) * b;  // activation and gradient, in and out
  m.total_bytes = m.params_bytes + m.stash_bytes + m.working_bytes + m.boundary_bytes;
  return m;
}

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
  double params = 0, stash = 0, kept = 0;
  const int end = RematerializedEnd(model, first, last);
  for (int i = first; i <= last; ++i) {
    params += model.layers[i].params;
    stash += model.layers[i].stash_bytes;
    if (i >= end) kept += model.layers[i].stash_bytes;
  }
  const double input = first == 0 ? model.input_bytes : cut_bytes[first - 1];
  const double output = last + 1 < static_cast<int>(model.layers.size()) ? cut_bytes[last] : 0;
  return FromSums(params, stash, kept, input, output, in);
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
  std::vector<int> in_flight(s.num_stages, 0), most(s.num_stages, 0);
  for (const auto& program : s.programs) {
    for (const ir::Op& op : program) {
      if (op.stage < 0 || op.stage >= s.num_stages) continue;
      if (op.kind == ir::OpKind::kForward) most[op.stage] = std::max(most[op.stage], ++in_flight[op.stage]);
      if (op.kind == ir::OpKind::kBackward || op.kind == ir::OpKind::kBackwardWeight) --in_flight[op.stage];
    }
  }
  return most;
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
