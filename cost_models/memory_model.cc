#include "cost_models/memory_model.h"

#include <algorithm>

#include "ir/builders.h"

namespace twinpipe::cost {

CellMemory CellPeakMemory(const Model& model, const std::vector<double>& cut_bytes, int first, int last,
                          const MemoryInputs& in) {
  CellMemory m;
  double params = 0, stash = 0, kept = 0;
  const int end = RematerializedEnd(model, first, last);
  for (int i = first; i <= last; ++i) {
    params += model.layers[i].params;
    stash += model.layers[i].stash_bytes;
    if (i >= end) kept += model.layers[i].stash_bytes;
  }
  // What a recomputed micro-batch keeps: its boundary input and the
  // activations of the layers recompute does not re-run.
  const double input = first == 0 ? model.input_bytes : cut_bytes[first - 1];
  const double keeps = input + kept;
  const double output = last + 1 < static_cast<int>(model.layers.size()) ? cut_bytes[last] : 0;
  const double b = in.micro_batch;
  m.params_bytes = params * in.bytes_per_param;
  switch (in.recompute) {
    case ir::RecomputeMode::kNone:
    case ir::RecomputeMode::kSelective:  // the layers' stash is already the selective one
      m.stash_bytes = in.in_flight * stash * b;
      break;
    case ir::RecomputeMode::kFull:
      m.stash_bytes = in.in_flight * keeps * b;
      m.working_bytes = (stash - kept) * b;
      break;
    case ir::RecomputeMode::kExceptLast:
      // One micro-batch keeps everything; the others keep their input.
      m.stash_bytes = (in.in_flight - 1) * keeps * b + stash * b;
      m.working_bytes = in.in_flight > 1 ? stash * b : 0;
      break;
  }
  m.boundary_bytes = 2 * (input + output) * b;  // activation and gradient, in and out
  m.total_bytes = m.params_bytes + m.stash_bytes + m.working_bytes + m.boundary_bytes;
  return m;
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
  // `auto` plans its own memory; its partition assumes zb-h1's.
  auto built = ir::BuildByName(schedule == ir::kAutoSchedule ? "zb-h1" : schedule, devices, micro_batches, chunks);
  if (!built) {
    return std::vector<int>(static_cast<size_t>(devices) * std::max(1, chunks > 0 ? chunks : ir::DefaultChunks(schedule)),
                            micro_batches);
  }
  return InFlightPerStage(*built);
}

}  // namespace twinpipe::cost
