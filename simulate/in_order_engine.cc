// The simulator's fast path: when no two transfers can share bandwidth (each
// device pair has its own link, carrying one transfer at a time), every
// resource serves its ops in a fixed order (program order on a device's
// engines, FIFO on a channel), so the step is a longest-path evaluation:
// start = max(end of the resource's previous op, end of the op's inputs).
// Devices are advanced one at a time for as long as their inputs are ready,
// which walks memory sequentially; no event queue is needed. Same results as
// the event-driven engine (a test holds them against each other).
#include <algorithm>

#include <fmt/format.h>

#include "cost_models/comm_model.h"
#include "ir/channels.h"
#include "simulate/engine_parts.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

using ir::Op;
using ir::OpKind;

// A memory change of the compute stream: op id x 2, + 1 when at the op's
// end (its time is looked up at merge time), and its size.
struct MemoryEvent {
  int32_t at;
  double delta;
};

struct InOrderChannel {
  const ir::Channel* pair;  // src, dst; its receives are its allocations, in time order
  double free = 0;
  int32_t prev_send = -1;
};

// The receive a send's transfer fills: the receiving stage's op for the same
// micro-batch, which on a verified schedule is the channel's next receive in
// FIFO order (ir/channels.h) but lies on a huge page where the channel's
// list does not; -1 when there is none.
int32_t ReceiveOf(const Dependencies& deps, const Op& send, int32_t stages) {
  const bool forward = send.kind == OpKind::kSendF;
  const int32_t stage = forward ? send.stage + 1 : send.stage - 1;
  if (stage < 0 || stage >= stages) return -1;
  return deps.Find(forward ? OpKind::kRecvF : OpKind::kRecvB, stage, send.micro_batch);
}

bool IsComputeEngineOp(OpKind k) { return ComputeSlot(k) >= 0 || k == OpKind::kStep; }

}  // namespace

Result<SimResult> SimulateInOrder(const ir::Schedule& s, const PlanCosts& c, const SimOptions& options) {
  const Dependencies deps(s);
  const int32_t D = s.num_devices;
  const int64_t n = deps.size();
  SimResult r;
  r.start_s.resize(n);  // uninitialised: every op's times are written when it is done
  r.end_s.resize(n);
  r.devices.assign(D, {});
  r.peak_in_flight.assign(s.num_stages, 0);
  BigVector<char> done(n, 0);

  // Channels: sends and receives paired in FIFO order.
  const ir::Channels pairs(s);
  std::vector<InOrderChannel> channels;
  channels.reserve(pairs.size());
  for (const ir::Channel& p : pairs) channels.push_back(InOrderChannel{&p});
  auto channel = [&](int32_t src, int32_t dst) { return pairs.Find(src, dst); };
  std::vector<LinkStats> links;
  for (const auto& ch : channels) links.push_back(LinkStats{ch.pair->src, ch.pair->dst, 0, 0});

  std::vector<size_t> pc(D, 0);
  std::vector<double> compute_free(D, 0), allreduce_free(D, 0);
  std::vector<int32_t> compute_prev(D, -1), allreduce_prev(D, -1);
  std::vector<std::vector<MemoryEvent>> compute_memory(D);
  std::vector<int32_t> in_flight(s.num_stages, 0);
  std::vector<char> blocked(D, 0);
  const bool serial = c.comm_on_compute_stream;
  BigVector<char> arrived(serial ? n : 0, 0);  // serial: a receive's data is there (its end is set)
  std::vector<int32_t> ready;
  for (int32_t d = D - 1; d >= 0; --d) ready.push_back(d);
  // At most two changes per compute op; about one per op where transfers
  // interleave (the vector grows where not).
  for (int32_t d = 0; d < D; ++d) compute_memory[d].reserve(s.programs[d].size());

  // Start time of an op on a resource free at `free` after `prev`: the later
  // of that and its inputs; `who` gets the op whose end decided it.
  auto start_after = [&](const Op& op, double free, int32_t prev, int32_t& who, bool& inputs_done) {
    double start = free;
    who = prev;
    inputs_done = true;
    deps.ForEach(op, [&](int32_t dep) {
      if (!done[dep]) {
        inputs_done = false;
      } else if (who < 0 || r.end_s[dep] > start) {
        start = std::max(start, r.end_s[dep]);
        who = dep;
      }
    });
    return start;
  };

  while (!ready.empty()) {
    const int32_t d = ready.back();
    ready.pop_back();
    blocked[d] = 0;
    const auto& program = s.programs[d];
    for (; pc[d] < program.size(); ++pc[d]) {
      const Op& op = program[pc[d]];
      const int32_t id = op.id;
      if (ir::IsRecv(op.kind)) {
        if (!serial) continue;  // completed by its sender
        if (!arrived[id]) {     // the worker waits in the receive
          blocked[d] = 1;
          break;
        }
        const double start = compute_free[d];
        r.start_s[id] = start;
        r.end_s[id] = std::max(start, r.end_s[id]);
        done[id] = 1;
        compute_free[d] = r.end_s[id];
        compute_prev[d] = id;
        continue;
      }
      int32_t who = -1;
      bool inputs_done = true;
      if (IsComputeEngineOp(op.kind)) {
        const double start = start_after(op, compute_free[d], compute_prev[d], who, inputs_done);
        if (!inputs_done) {
          blocked[d] = 1;
          break;
        }
        const double end = start + OpDuration(op, c, s.replicas);
        r.start_s[id] = start;
        r.end_s[id] = end;
        done[id] = 1;
        compute_free[d] = end;
        compute_prev[d] = id;
        r.devices[d].busy_s += end - start;
        TouchSpan(r.devices[d], start, end);
        if (const double delta = MemoryAtStart(c, op); delta != 0) compute_memory[d].push_back({2 * id, delta});
        if (const double delta = MemoryAtEnd(deps, c, op); delta != 0) compute_memory[d].push_back({2 * id + 1, delta});
        if (op.kind == OpKind::kForward) {
          r.peak_in_flight[op.stage] = std::max(r.peak_in_flight[op.stage], ++in_flight[op.stage]);
        }
        if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardWeight) --in_flight[op.stage];
      } else if (op.kind == OpKind::kAllReduce) {
        const double start = start_after(op, allreduce_free[d], allreduce_prev[d], who, inputs_done);
        if (!inputs_done) {
          blocked[d] = 1;
          break;
        }
        r.start_s[id] = start;
        r.end_s[id] = start + OpDuration(op, c, s.replicas);
        done[id] = 1;
        allreduce_free[d] = r.end_s[id];
        allreduce_prev[d] = id;
      } else if (ir::IsSend(op.kind)) {
        InOrderChannel& ch = channels[channel(d, op.peer)];
        const double start = start_after(op, serial ? std::max(ch.free, compute_free[d]) : ch.free, ch.prev_send, who,
                                         inputs_done);
        const int32_t recv = ReceiveOf(deps, op, s.num_stages);
        if (!inputs_done || recv < 0) {  // no receive will ever take it
          blocked[d] = 1;
          break;
        }
        const double end = start + c.TransferSeconds(d, op.peer, static_cast<double>(op.bytes));
        r.start_s[id] = r.start_s[recv] = start;
        r.end_s[id] = r.end_s[recv] = end;
        done[id] = 1;
        if (serial) {
          arrived[recv] = 1;  // the receiver's worker takes it when it gets to the receive
          compute_free[d] = end;
          compute_prev[d] = id;
        } else {
          done[recv] = 1;
        }
        ch.free = end;
        ch.prev_send = id;
        LinkStats& link = links[&ch - channels.data()];
        link.bytes += op.bytes;
        link.busy_s += end - start;
        if (blocked[ch.pair->dst]) {
          blocked[ch.pair->dst] = 0;
          ready.push_back(ch.pair->dst);
        }
      }
    }
  }

  int64_t finished = 0;
  for (int64_t id = 0; id < n; ++id) finished += done[id];
  if (finished != n) {
    std::vector<int32_t> stuck(D, -1);
    for (int32_t d = 0; d < D; ++d) {
      if (pc[d] < s.programs[d].size()) stuck[d] = s.programs[d][pc[d]].id;
    }
    double now = 0;
    for (int64_t id = 0; id < n; ++id) {
      if (done[id]) now = std::max(now, r.end_s[id]);
    }
    return FailRuntime(fmt::format("the schedule cannot progress at t={} s: {}", now, DescribeBlocked(deps, stuck, done)));
  }

  // Memory: per device, the compute stream's events merged with its incoming
  // channels' allocations (each in time order; at equal times compute first).
  r.memory.assign(D, {});
  struct Change {
    double time, delta;
    int32_t op;
  };
  auto compute_change = [&](MemoryEvent e) {
    const int32_t id = e.at / 2;
    return Change{e.at % 2 ? r.end_s[id] : r.start_s[id], e.delta, id};
  };
  auto allocation = [&](int32_t d, int32_t recv) {
    return Change{r.start_s[recv], static_cast<double>(deps.OpOn(d, recv).bytes), recv};
  };
  for (int32_t d = 0; d < D; ++d) {
    // Stream 0: the compute engine's changes; then each incoming channel's.
    const std::vector<MemoryEvent>& compute = compute_memory[d];
    std::vector<const std::vector<int32_t>*> streams = {nullptr};
    for (const auto& ch : channels) {
      if (ch.pair->dst == d) streams.push_back(&ch.pair->recvs);
    }
    auto size_of = [&](size_t k) { return k == 0 ? compute.size() : streams[k]->size(); };
    auto change = [&](size_t k, size_t i) {
      return k == 0 ? compute_change(compute[i]) : allocation(d, (*streams[k])[i]);
    };
    // A change's time alone, to pick the next (its size is worked out for
    // the one picked only).
    auto time_of = [&](size_t k, size_t i) {
      if (k > 0) return r.start_s[(*streams[k])[i]];
      const int32_t e = compute[i].at;
      return e % 2 ? r.end_s[e / 2] : r.start_s[e / 2];
    };
    std::vector<size_t> at(streams.size(), 0);
    double now = c.static_bytes[d];
    auto& samples = r.memory[d];
    if (options.timeline) {
      size_t changes = 1;
      for (size_t k = 0; k < streams.size(); ++k) changes += size_of(k);
      samples.reserve(changes);
      samples.emplace_back(0.0, now);
    }
    DeviceStats& stats = r.devices[d];
    stats.peak_memory_bytes = now;
    while (true) {
      int best = -1;
      double best_time = 0;
      for (size_t k = 0; k < streams.size(); ++k) {
        if (at[k] == size_of(k)) continue;
        const double t = time_of(k, at[k]);
        if (best < 0 || t < best_time) {
          best = static_cast<int>(k);
          best_time = t;
        }
      }
      if (best < 0) break;
      const Change e = change(best, at[best]++);
      now += e.delta;
      if (options.timeline) {
        if (samples.back().first == e.time) {
          samples.back().second = now;
        } else {
          samples.emplace_back(e.time, now);
        }
      }
      if (now > stats.peak_memory_bytes) {
        stats.peak_memory_bytes = now;
        stats.peak_op = e.op;
      }
    }
  }

  const int32_t last_op = FinishStep(r, D);
  r.links = std::move(links);
  if (!options.timeline) return r;
  // The critical path, walked back from the last op: each op's predecessor
  // is whichever of its resource's previous op and its inputs ended last
  // (the resource's op on ties), as the event-driven engine records it.
  auto previous_on_resource = [&](int32_t id) {
    const Op& op = deps.op(id);
    const auto& program = s.programs[op.device];
    const int32_t first = program.front().id;
    for (int32_t p = id - 1; p >= first; --p) {
      const Op& q = program[p - first];
      auto on_stream = [&](OpKind k) { return IsComputeEngineOp(k) || (serial && ir::IsComm(k)); };
      const bool same = on_stream(op.kind)                ? on_stream(q.kind)
                        : op.kind == OpKind::kAllReduce ? q.kind == OpKind::kAllReduce
                                                        : ir::IsSend(q.kind) && q.peer == op.peer;
      if (same) return p;
    }
    return -1;
  };
  auto send_of = [&](int32_t recv) {  // a receive's transfer is its send's
    const InOrderChannel& ch = channels[channel(deps.op(recv).peer, deps.op(recv).device)];
    const auto k = std::lower_bound(ch.pair->recvs.begin(), ch.pair->recvs.end(), recv) - ch.pair->recvs.begin();
    return k < static_cast<ptrdiff_t>(ch.pair->sends.size()) ? ch.pair->sends[k] : -1;
  };
  for (int32_t op = last_op; op >= 0;) {
    r.critical_path.push_back(op);
    const int32_t at = ir::IsRecv(deps.op(op).kind) && !serial ? send_of(op) : op;
    int32_t who = previous_on_resource(at);
    double latest = who >= 0 ? r.end_s[who] : 0;
    if (serial && ir::IsRecv(deps.op(op).kind)) {  // waited for its data?
      const int32_t send = send_of(op);
      if (send >= 0 && (who < 0 || r.end_s[send] > latest)) {
        who = send;
        latest = r.end_s[send];
      }
    }
    deps.ForEach(at, [&](int32_t dep) {
      if (who < 0 || r.end_s[dep] > latest) {
        who = dep;
        latest = r.end_s[dep];
      }
    });
    op = who;
  }
  std::reverse(r.critical_path.begin(), r.critical_path.end());
  return r;
}

}  // namespace twinpipe::simulate
