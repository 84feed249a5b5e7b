// The simulator's fast path: when no two transfers can share bandwidth (each
// device pair has its own link, carrying one transfer at a time), every
// resource serves its ops in a fixed order (program order on a device's
// engines, FIFO on a channel), so the step is a longest-path evaluation:
// start = max(end of the resource's previous op, end of the op's inputs).
// Devices are advanced one at a time for as long as their inputs are ready,
// which walks memory sequentially; no event queue is needed. Same results as
// the event-driven engine (a test holds them against each other).
//
// Three phases, each a method of InOrderSimulator: the walk (every op's start
// and end), the memory timeline (each device's changes merged in time order)
// and the critical path (walked back from the last op).
#include <algorithm>

#include <fmt/format.h>

#include "cost_models/comm_model.h"
#include "ir/channels.h"
#include "ir/in_flight.h"
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

class InOrderSimulator {
 public:
  InOrderSimulator(const ir::Schedule& s, const PlanCosts& c, const SimOptions& options);
  Result<SimResult> Run();

 private:
  // The walk: devices taken from the ready stack, each advanced through its
  // program until an op's inputs are not done; a send wakes its receiver.
  void Walk();
  void Advance(int32_t device);
  // Each runs the op at the device's program counter if it can (false: the
  // device waits on it).
  bool Issue(int32_t device, const Op& op);
  bool Receive(int32_t device, const Op& op);
  bool Compute(int32_t device, const Op& op);
  bool AllReduce(int32_t device, const Op& op);
  bool Send(int32_t device, const Op& op);
  // The op's start on a resource free at `free`: the later of that and its
  // inputs' ends; false in `inputs_done` when an input is not done.
  double StartAfter(const Op& op, double free, bool& inputs_done) const;
  // Why the walk stopped short: each device's next op and what it waits for.
  std::string Stuck() const;

  // The memory timeline: per device, the compute stream's changes merged with
  // its incoming channels' allocations (each in time order; at equal times
  // compute first); its samples where the options ask for the timeline.
  void MemoryTimeline();
  void DeviceMemory(int32_t device);

  // The critical path, walked back from the last op: each op's predecessor
  // is whichever of its resource's previous op and its inputs ended last
  // (the resource's op on ties), as the event-driven engine records it.
  void CriticalPath(int32_t last_op);
  int32_t PreviousOnResource(int32_t id) const;
  int32_t SendOf(int32_t recv) const;  // a receive's transfer is its send's

  const ir::Schedule& s_;
  const PlanCosts& c_;
  const SimOptions& options_;
  const Dependencies deps_;
  const int32_t devices_;
  const bool serial_;  // comm on the compute stream
  const ir::Channels pairs_;  // sends and receives paired in FIFO order
  SimResult r_;
  BigVector<char> done_;
  BigVector<char> arrived_;  // serial: a receive's data is there (its end is set)
  std::vector<InOrderChannel> channels_;
  std::vector<LinkStats> links_;
  std::vector<size_t> pc_;  // per device: its next op in program order
  std::vector<double> compute_free_, allreduce_free_;
  std::vector<std::vector<MemoryEvent>> compute_memory_;
  ir::InFlightCounter in_flight_;
  std::vector<char> blocked_;
  std::vector<int32_t> ready_;
  const std::vector<double> overlapped_;  // OverlappedDurations: by id; empty: OpDuration
  double Duration(const Op& op) const {
    return overlapped_.empty() ? OpDuration(op, c_, s_.replicas) : overlapped_[op.id];
  }
};

InOrderSimulator::InOrderSimulator(const ir::Schedule& s, const PlanCosts& c, const SimOptions& options)
    : s_(s),
      c_(c),
      options_(options),
      deps_(s),
      devices_(s.num_devices),
      serial_(c.comm_on_compute_stream),
      pairs_(s),
      done_(deps_.size(), 0),
      arrived_(serial_ ? deps_.size() : 0, 0),
      pc_(devices_, 0),
      compute_free_(devices_, 0),
      allreduce_free_(devices_, 0),
      compute_memory_(devices_),
      in_flight_(s.num_stages),
      blocked_(devices_, 0),
      overlapped_(OverlappedDurations(s, c)) {
  const int64_t n = deps_.size();
  r_.start_s.resize(n);  // uninitialised: every op's times are written when it is done
  r_.end_s.resize(n);
  r_.devices.assign(devices_, {});
  channels_.reserve(pairs_.size());
  for (const ir::Channel& p : pairs_) channels_.push_back(InOrderChannel{&p});
  for (const auto& ch : channels_) links_.push_back(LinkStats{ch.pair->src, ch.pair->dst, 0, 0});
  for (int32_t d = devices_ - 1; d >= 0; --d) ready_.push_back(d);
  // At most two changes per compute op; about one per op where transfers
  // interleave (the vector grows where not).
  for (int32_t d = 0; d < devices_; ++d) compute_memory_[d].reserve(s.programs[d].size());
}

Result<SimResult> InOrderSimulator::Run() {
  Walk();
  int64_t finished = 0;
  for (int64_t id = 0; id < deps_.size(); ++id) finished += done_[id];
  if (finished != deps_.size()) return FailRuntime(Stuck());
  r_.peak_in_flight = in_flight_.TakePeak();
  MemoryTimeline();
  const int32_t last_op = FinishStep(r_, devices_);
  r_.links = std::move(links_);
  if (options_.timeline) CriticalPath(last_op);
  return std::move(r_);
}

void InOrderSimulator::Walk() {
  while (!ready_.empty()) {
    const int32_t d = ready_.back();
    ready_.pop_back();
    Advance(d);
  }
}

void InOrderSimulator::Advance(int32_t d) {
  blocked_[d] = 0;
  const auto& program = s_.programs[d];
  for (; pc_[d] < program.size(); ++pc_[d]) {
    if (!Issue(d, program[pc_[d]])) {
      blocked_[d] = 1;
      return;
    }
  }
}

bool InOrderSimulator::Issue(int32_t d, const Op& op) {
  if (ir::IsRecv(op.kind)) return !serial_ || Receive(d, op);  // overlapped: completed by its sender
  if (ir::IsCompute(op.kind)) return Compute(d, op);
  if (op.kind == OpKind::kAllReduce) return AllReduce(d, op);
  if (ir::IsSend(op.kind)) return Send(d, op);
  return true;
}

double InOrderSimulator::StartAfter(const Op& op, double free, bool& inputs_done) const {
  double start = free;
  inputs_done = true;
  deps_.ForEach(op, [&](int32_t dep) {
    if (!done_[dep]) {
      inputs_done = false;
    } else {
      start = std::max(start, r_.end_s[dep]);
    }
  });
  return start;
}

bool InOrderSimulator::Receive(int32_t d, const Op& op) {
  const int32_t id = op.id;
  if (!arrived_[id]) return false;  // the worker waits in the receive
  const double start = compute_free_[d];
  r_.start_s[id] = start;
  r_.end_s[id] = std::max(start, r_.end_s[id]);
  done_[id] = 1;
  compute_free_[d] = r_.end_s[id];
  return true;
}

bool InOrderSimulator::Compute(int32_t d, const Op& op) {
  bool inputs_done = true;
  const double start = StartAfter(op, compute_free_[d], inputs_done);
  if (!inputs_done) return false;
  const int32_t id = op.id;
  const double end = start + Duration(op);
  r_.start_s[id] = start;
  r_.end_s[id] = end;
  done_[id] = 1;
  compute_free_[d] = end;
  r_.devices[d].busy_s += end - start;
  TouchSpan(r_.devices[d], start, end);
  if (const double delta = MemoryAtStart(deps_, c_, op); delta != 0) compute_memory_[d].push_back({2 * id, delta});
  if (const double delta = MemoryAtEnd(deps_, c_, op); delta != 0) compute_memory_[d].push_back({2 * id + 1, delta});
  in_flight_.Ended(op);
  return true;
}

bool InOrderSimulator::AllReduce(int32_t d, const Op& op) {
  bool inputs_done = true;
  const double start = StartAfter(op, allreduce_free_[d], inputs_done);
  if (!inputs_done) return false;
  const int32_t id = op.id;
  r_.start_s[id] = start;
  r_.end_s[id] = start + Duration(op);
  done_[id] = 1;
  allreduce_free_[d] = r_.end_s[id];
  return true;
}

bool InOrderSimulator::Send(int32_t d, const Op& op) {
  InOrderChannel& ch = channels_[pairs_.Find(d, op.peer)];
  bool inputs_done = true;
  const double start = StartAfter(op, serial_ ? std::max(ch.free, compute_free_[d]) : ch.free, inputs_done);
  const int32_t recv = ReceiveOf(deps_, op, s_.num_stages);
  if (!inputs_done || recv < 0) return false;  // no receive will ever take it
  const int32_t id = op.id;
  const double end = start + c_.TransferSeconds(d, op.peer, static_cast<double>(op.bytes));
  r_.start_s[id] = r_.start_s[recv] = start;
  r_.end_s[id] = r_.end_s[recv] = end;
  done_[id] = 1;
  if (serial_) {
    arrived_[recv] = 1;  // the receiver's worker takes it when it gets to the receive
    compute_free_[d] = end;
  } else {
    done_[recv] = 1;
  }
  ch.free = end;
  LinkStats& link = links_[&ch - channels_.data()];
  link.bytes += op.bytes;
  link.busy_s += end - start;
  if (blocked_[ch.pair->dst]) {
    blocked_[ch.pair->dst] = 0;
    ready_.push_back(ch.pair->dst);
  }
  return true;
}

std::string InOrderSimulator::Stuck() const {
  std::vector<int32_t> stuck(devices_, -1);
  for (int32_t d = 0; d < devices_; ++d) {
    if (pc_[d] < s_.programs[d].size()) stuck[d] = s_.programs[d][pc_[d]].id;
  }
  double now = 0;
  for (int64_t id = 0; id < deps_.size(); ++id) {
    if (done_[id]) now = std::max(now, r_.end_s[id]);
  }
  return fmt::format("the schedule cannot progress at t={} s: {}", now, DescribeBlocked(deps_, stuck, done_));
}

void InOrderSimulator::MemoryTimeline() {
  r_.memory.assign(devices_, {});
  for (int32_t d = 0; d < devices_; ++d) DeviceMemory(d);
}

void InOrderSimulator::DeviceMemory(int32_t d) {
  struct Change {
    double time, delta;
    int32_t op;
  };
  // Stream 0: the compute engine's changes; then each incoming channel's.
  const std::vector<MemoryEvent>& compute = compute_memory_[d];
  std::vector<const std::vector<int32_t>*> streams = {nullptr};
  for (const auto& ch : channels_) {
    if (ch.pair->dst == d) streams.push_back(&ch.pair->recvs);
  }
  auto size_of = [&](size_t k) { return k == 0 ? compute.size() : streams[k]->size(); };
  auto change = [&](size_t k, size_t i) {
    if (k > 0) {
      const int32_t recv = (*streams[k])[i];
      return Change{r_.start_s[recv], static_cast<double>(deps_.OpOn(d, recv).bytes), recv};
    }
    const int32_t id = compute[i].at / 2;
    return Change{compute[i].at % 2 ? r_.end_s[id] : r_.start_s[id], compute[i].delta, id};
  };
  // A change's time alone, to pick the next (its size is worked out for
  // the one picked only).
  auto time_of = [&](size_t k, size_t i) {
    if (k > 0) return r_.start_s[(*streams[k])[i]];
    const int32_t e = compute[i].at;
    return e % 2 ? r_.end_s[e / 2] : r_.start_s[e / 2];
  };
  std::vector<size_t> at(streams.size(), 0);
  double now = c_.static_bytes[d];
  auto& samples = r_.memory[d];
  if (options_.timeline) {
    size_t changes = 1;
    for (size_t k = 0; k < streams.size(); ++k) changes += size_of(k);
    samples.reserve(changes);
    samples.emplace_back(0.0, now);
  }
  DeviceStats& stats = r_.devices[d];
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
    if (options_.timeline) {
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

int32_t InOrderSimulator::PreviousOnResource(int32_t id) const {
  const Op& op = deps_.op(id);
  const auto& program = s_.programs[op.device];
  const int32_t first = program.front().id;
  auto on_stream = [&](OpKind k) { return ir::IsCompute(k) || (serial_ && ir::IsComm(k)); };
  for (int32_t p = id - 1; p >= first; --p) {
    const Op& q = program[p - first];
    const bool same = on_stream(op.kind)                ? on_stream(q.kind)
                      : op.kind == OpKind::kAllReduce ? q.kind == OpKind::kAllReduce
                                                      : ir::IsSend(q.kind) && q.peer == op.peer;
    if (same) return p;
  }
  return -1;
}

int32_t InOrderSimulator::SendOf(int32_t recv) const {
  const ir::Channel& ch = *channels_[pairs_.Find(deps_.op(recv).peer, deps_.op(recv).device)].pair;
  const auto k = std::lower_bound(ch.recvs.begin(), ch.recvs.end(), recv) - ch.recvs.begin();
  return k < static_cast<ptrdiff_t>(ch.sends.size()) ? ch.sends[k] : -1;
}

void InOrderSimulator::CriticalPath(int32_t last_op) {
  for (int32_t op = last_op; op >= 0;) {
    r_.critical_path.push_back(op);
    const bool recv = ir::IsRecv(deps_.op(op).kind);
    const int32_t at = recv && !serial_ ? SendOf(op) : op;
    int32_t who = PreviousOnResource(at);
    double latest = who >= 0 ? r_.end_s[who] : 0;
    if (serial_ && recv) {  // waited for its data?
      const int32_t send = SendOf(op);
      if (send >= 0 && (who < 0 || r_.end_s[send] > latest)) {
        who = send;
        latest = r_.end_s[send];
      }
    }
    deps_.ForEach(at, [&](int32_t dep) {
      if (who < 0 || r_.end_s[dep] > latest) {
        who = dep;
        latest = r_.end_s[dep];
      }
    });
    op = who;
  }
  std::reverse(r_.critical_path.begin(), r_.critical_path.end());
}

}  // namespace

Result<SimResult> SimulateInOrder(const ir::Schedule& s, const PlanCosts& c, const SimOptions& options) {
  if (!c.gpu.empty()) return SimulateEventDriven(s, c);  // only it shares a GPU between devices
  return InOrderSimulator(s, c, options).Run();
}

}  // namespace twinpipe::simulate
