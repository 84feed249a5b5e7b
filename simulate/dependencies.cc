#include "simulate/dependencies.h"

#include <algorithm>

#include <fmt/format.h>

#include "cost_models/comm_model.h"

namespace twinpipe::simulate {

using ir::Op;
using ir::OpKind;

double MemoryAtStart(const SimCosts& c, const ir::Op& op) {
  if (op.kind == OpKind::kForward) return c.activation_bytes[op.stage];
  if (op.kind == OpKind::kRecompute) return c.activation_bytes[op.stage] - c.input_bytes[op.stage];
  return 0;
}

double MemoryAtEnd(const Dependencies& deps, const SimCosts& c, const ir::Op& op) {
  double delta = 0;
  if (op.kind == OpKind::kForward && deps.Recomputed(op.stage, op.micro_batch)) {
    delta += c.input_bytes[op.stage] - c.activation_bytes[op.stage];
  }
  if (op.kind == OpKind::kBackward) delta -= c.activation_bytes[op.stage];
  if (op.kind == OpKind::kBackwardInput) delta -= c.activation_bytes[op.stage] - c.PendingBytes(op.stage);
  if (op.kind == OpKind::kBackwardWeight) delta -= c.PendingBytes(op.stage);
  const int32_t recv = deps.InputRecv(op);
  if (recv >= 0) delta -= static_cast<double>(deps.OpOn(op.device, recv).bytes);  // the consumed receive buffer
  return delta;
}

double ComputeStreamPeak(const ir::Schedule& s, ir::RecomputeMode recompute, const SimCosts& c) {
  const int32_t M = s.num_micro_batches;
  // An R the schedule already has keeps InsertRecompute from adding one.
  std::vector<char> has_recompute;
  for (const auto& program : s.programs) {
    for (const Op& op : program) {
      if (op.kind != OpKind::kRecompute) continue;
      if (has_recompute.empty()) has_recompute.assign(static_cast<size_t>(s.num_stages) * M, 0);
      has_recompute[static_cast<size_t>(op.stage) * M + op.micro_batch] = 1;
    }
  }
  auto recomputed = [&](const Op& op) {
    if (!has_recompute.empty() && has_recompute[static_cast<size_t>(op.stage) * M + op.micro_batch]) return true;
    return ir::InsertsRecompute(recompute) && !(recompute == ir::RecomputeMode::kExceptLast && op.micro_batch == M - 1);
  };
  double peak = 0;
  for (int32_t d = 0; d < s.num_devices; ++d) {
    double now = 0, most = 0;
    for (const Op& op : s.programs[d]) {
      if (op.stage < 0) continue;  // STEP, all-reduce
      const double act = c.activation_bytes[op.stage], input = c.input_bytes[op.stage];
      switch (op.kind) {
        case OpKind::kForward:
          now += act;
          most = std::max(most, now);
          if (recomputed(op)) now += input - act;
          break;
        case OpKind::kRecompute:
          now += act - input;
          most = std::max(most, now);
          break;
        case OpKind::kBackward:
        case OpKind::kBackwardInput:
          if (recomputed(op) && (has_recompute.empty() ||
                                 !has_recompute[static_cast<size_t>(op.stage) * M + op.micro_batch])) {
            now += act - input;  // the R InsertRecompute puts before it
            most = std::max(most, now);
          }
          now -= op.kind == OpKind::kBackward ? act : act - c.PendingBytes(op.stage);
          break;
        case OpKind::kBackwardWeight:
          now -= c.PendingBytes(op.stage);
          break;
        default:
          break;
      }
    }
    peak = std::max(peak, c.static_bytes[d] + most);
  }
  return peak;
}

std::string DescribeBlocked(const Dependencies& deps, const std::vector<int32_t>& stuck, const BigVector<char>& done) {
  std::vector<std::string> lines;
  for (size_t d = 0; d < stuck.size(); ++d) {
    if (stuck[d] < 0) continue;
    const ir::Op& op = deps.op(stuck[d]);
    std::vector<std::string> waits;
    deps.ForEach(stuck[d], [&](int32_t dep) {
      if (!done[dep]) waits.push_back(ir::OpToken(deps.op(dep)));
    });
    if (ir::IsSend(op.kind) && waits.empty()) waits.push_back(fmt::format("a receive on device {}", op.peer));
    lines.push_back(fmt::format("device {} at {} waits for {}", d, ir::OpToken(op),
                                waits.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(waits, ", "))));
  }
  return fmt::format("{}", fmt::join(lines, "; "));
}

int32_t FinishStep(SimResult& r, int32_t devices) {
  double last = 0;
  int32_t last_op = -1;
  for (size_t id = 0; id < r.end_s.size(); ++id) {
    if (r.end_s[id] >= last) {
      last = r.end_s[id];
      last_op = static_cast<int32_t>(id);
    }
  }
  r.step_time_s = last;
  double busy = 0;
  for (const auto& d : r.devices) busy += d.busy_s;
  r.bubble_fraction = last > 0 ? 1 - busy / (devices * last) : 0;
  double span = 0;
  for (const auto& d : r.devices) span = std::max(span, d.last_end_s - d.first_start_s);
  r.overlapped_step_s = span;
  r.overlapped_bubble_fraction = span > 0 ? 1 - busy / (devices * span) : 0;
  return last_op;
}

double OpDuration(const ir::Op& op, const SimCosts& c, int32_t replicas) {
  if (op.kind == OpKind::kStep) return c.step_s[op.device];
  if (op.kind == OpKind::kAllReduce) {
    return cost::CollectiveTime(cost::Kernel::Collective::kAllReduce, static_cast<double>(op.bytes),
                                {.ranks = static_cast<double>(replicas),
                                 .nodes = static_cast<double>(c.replica_nodes),
                                 .intra = &c.link,
                                 .inter = &c.inter_node_link});
  }
  return c.compute_s[op.stage][ComputeSlot(op.kind)];
}

}  // namespace twinpipe::simulate
