#include "simulate/engine.h"

#include <algorithm>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "cost_models/comm_model.h"
#include "ir/channels.h"
#include "ir/huge_page_allocator.h"
#include "ir/in_flight.h"
#include "simulate/engine_parts.h"

namespace twinpipe::simulate {

using ir::Op;
using ir::OpKind;

namespace {

constexpr int32_t kNone = -1;

enum EventType : uint8_t { kComputeEnd, kAllReduceEnd, kPhaseEnd, kDomainCheck, kGpuCheck };

struct Event {
  double time;
  uint64_t seq;
  EventType type;
  int32_t a;
  uint32_t b;
};

struct EventAfter {
  bool operator()(const Event& x, const Event& y) const {
    return x.time != y.time ? x.time > y.time : x.seq > y.seq;
  }
};

struct Transfer {
  int32_t send = kNone, recv = kNone;
  int32_t channel = 0;
  int32_t domain = 0;
  // 0 latency, 1 data, (host-staged) 2 latency, 3 data; then the
  // receivers' all-gather where there is one (PlanCosts::GatherSeconds).
  int8_t phase = 0;
  double bytes = 0;
  bool inter = false;    // between nodes: on the inter-node link
};

struct Channel {
  int32_t src, dst;
  std::vector<int32_t> transfers;  // in FIFO order
  size_t head = 0;
  bool busy = false;
};

// Processor sharing: active data phases split the bandwidth equally. `work`
// is the bytes each active transfer has moved since the domain last idled.
// A GPU that several devices share is a domain too: its bandwidth is 1 (a
// second of work per second), its members the compute ops under way.
struct Domain {
  double bandwidth = 0;
  double work = 0;
  double last_time = 0;
  uint32_t version = 0;
  std::vector<std::pair<double, int32_t>> active;  // min-heap of (finish work, transfer)
};

// Per-op simulation state (start and end live in the result's arrays).
struct OpState {
  int32_t unmet = 0;        // dependencies not yet complete
  int32_t last_dep = -1;    // the dependency that completed last
  int32_t pred = -1;        // the op whose end let this one start (critical path)
  int32_t link = -1;        // compute op: the receive holding its input; comm op: its transfer
};

struct Engine {
  std::vector<int32_t> ops;  // in program order
  size_t head = 0;
  bool busy = false;
};

class Simulator {
 public:
  Simulator(const ir::Schedule& s, const PlanCosts& c)
      : s_(s), c_(c), deps_(s), in_flight_(s.num_stages), overlapped_(OverlappedDurations(s, c)) {}

  Result<SimResult> Run();

 private:
  void Build();
  void Push(double t, EventType type, int32_t a, uint32_t b = 0) {
    events_.push(Event{t, seq_++, type, a, b});
  }
  // An engine's next op, started now if its inputs are done (kNone if not).
  int32_t StartNext(Engine& e);
  void TryCompute(int32_t device);
  void TryAllReduce(int32_t device);
  void TryChannel(int32_t channel);
  void StartPhase(int32_t transfer);
  // On a link's domain (`gpu` false) a member is a transfer's data phase; on
  // a shared GPU's, a compute op.
  void DomainJoin(bool gpu, int32_t domain, int32_t member, double work);
  void DomainReschedule(bool gpu, int32_t domain);
  void DomainCheck(bool gpu, int32_t domain, uint32_t version);
  void EndCompute(int32_t op);
  void FinishTransfer(int32_t transfer);
  void Complete(int32_t op);
  void Memory(int32_t device, double delta, int32_t op);
  double Duration(const Op& op) const;
  std::string Blocked() const;
  // Of two finished ops (or kNone), the one that ended later.
  int32_t Later(int32_t a, int32_t b) const {
    if (a == kNone) return b;
    if (b == kNone) return a;
    return r_.end_s[b] > r_.end_s[a] ? b : a;
  }

  const ir::Schedule& s_;
  const PlanCosts& c_;
  const Dependencies deps_;
  double now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, EventAfter> events_;

  // What the event loop reads of each op, copied out of the schedule.
  struct Info {
    OpKind kind = OpKind::kStep;
    int32_t device = 0, stage = -1, micro_batch = -1;
  };
  BigVector<const Op*> op_;              // by id
  BigVector<Info> info_;
  BigVector<OpState> st_;               // by id
  BigVector<int32_t> dep_offset_;        // CSR: dependents of op i
  BigVector<int32_t> dependents_;
  BigVector<char> done_;
  std::vector<Engine> compute_, allreduce_;
  BigVector<Transfer> transfers_;
  std::vector<Channel> channels_;
  std::vector<Domain> domains_;
  std::vector<Domain> gpu_domains_;
  std::vector<int32_t> shared_gpu_;  // [device]: its GPU's domain, kNone when it has the GPU alone
  std::vector<double> memory_now_;
  ir::InFlightCounter in_flight_;
  const std::vector<double> overlapped_;  // OverlappedDurations: by id; empty: OpDuration
  SimResult r_;
  int64_t completed_ = 0;
};

double Simulator::Duration(const Op& op) const {
  return overlapped_.empty() ? OpDuration(op, c_, s_.replicas) : overlapped_[op.id];
}

void Simulator::Build() {
  const int32_t D = s_.num_devices;
  const int64_t n = s_.NumOps();
  op_.resize(n);
  info_.resize(n);
  for (const auto& program : s_.programs) {
    for (const Op& op : program) {
      op_[op.id] = &op;
      info_[op.id] = Info{op.kind, op.device, op.stage, op.micro_batch};
    }
  }
  st_.assign(n, OpState{});
  auto for_each_dep = [&](int32_t id, auto&& visit) { deps_.ForEach(*op_[id], visit); };
  dep_offset_.assign(n + 1, 0);
  for (int32_t id = 0; id < n; ++id) {
    for_each_dep(id, [&](int32_t d) {
      ++st_[id].unmet;
      ++dep_offset_[d + 1];
    });
    st_[id].link = deps_.InputRecv(*op_[id]);
  }
  for (int64_t i = 0; i < n; ++i) dep_offset_[i + 1] += dep_offset_[i];
  dependents_.resize(dep_offset_[n]);
  {
    BigVector<int32_t> fill(dep_offset_.begin(), dep_offset_.end() - 1);
    for (int32_t id = 0; id < n; ++id) for_each_dep(id, [&](int32_t d) { dependents_[fill[d]++] = id; });
  }

  // Engines and channels.
  compute_.assign(D, {});
  allreduce_.assign(D, {});
  const ir::Channels pairs(s_);
  channels_.clear();
  for (const ir::Channel& ch : pairs) channels_.push_back(Channel{ch.src, ch.dst, {}, 0, false});
  // Domains: a channel's own (pair), the hosts' (host), or the sender's port
  // (device); the inter-node link's after the intra-node link's.
  auto domain_count = [&](const cost::Link& l) -> int32_t {
    return l.contention == cost::Contention::kHost ? 1 : l.contention == cost::Contention::kPerDevice ? D : -1;
  };
  auto domain_of = [&](int32_t ch, const cost::Link& l) -> int32_t {
    switch (l.contention) {
      case cost::Contention::kPerPair: return ch;
      case cost::Contention::kHost: return 0;
      case cost::Contention::kPerDevice: return channels_[ch].src;
    }
    return ch;
  };
  for (int32_t d = 0; d < D; ++d) {
    for (const Op& op : s_.programs[d]) {
      if (ir::IsCompute(op.kind)) compute_[d].ops.push_back(op.id);
      if (op.kind == OpKind::kAllReduce) allreduce_[d].ops.push_back(op.id);
      if (ir::IsSend(op.kind)) {
        const int32_t ch = pairs.Find(d, op.peer);
        const auto t = static_cast<int32_t>(transfers_.size());
        transfers_.push_back(Transfer{op.id, kNone, ch, 0, 0, static_cast<double>(op.bytes)});
        channels_[ch].transfers.push_back(t);
        st_[op.id].link = t;
      }
    }
  }
  // Receives pair with their channel's transfers in FIFO order (verified);
  // one without a send never completes.
  for (size_t ch = 0; ch < pairs.size(); ++ch) {
    const auto& recvs = pairs[ch].recvs;
    for (size_t k = 0; k < recvs.size() && k < channels_[ch].transfers.size(); ++k) {
      const int32_t id = recvs[k];
      const int32_t t = channels_[ch].transfers[k];
      transfers_[t].recv = id;
      st_[id].link = t;
    }
  }
  const auto channels = static_cast<int32_t>(channels_.size());
  const int32_t intra = domain_count(c_.link) < 0 ? channels : domain_count(c_.link);
  const int32_t inter = domain_count(c_.inter_node_link) < 0 ? channels : domain_count(c_.inter_node_link);
  for (auto& t : transfers_) {
    const Channel& ch = channels_[t.channel];
    t.inter = &c_.LinkBetween(ch.src, ch.dst) != &c_.link;
    t.domain = t.inter ? intra + domain_of(t.channel, c_.inter_node_link) : domain_of(t.channel, c_.link);
  }
  domains_.assign(static_cast<size_t>(intra), Domain{c_.link.bandwidth, 0, 0, 0, {}});
  if (!c_.node.empty()) domains_.resize(static_cast<size_t>(intra + inter), Domain{c_.inter_node_link.bandwidth, 0, 0, 0, {}});

  shared_gpu_.assign(D, kNone);
  if (!c_.gpu.empty()) {
    std::vector<int32_t> members;
    for (int32_t g : c_.gpu) {
      if (g >= static_cast<int32_t>(members.size())) members.resize(g + 1, 0);
      ++members[g];
    }
    for (int32_t d = 0; d < D; ++d) {
      if (members[c_.gpu[d]] > 1) shared_gpu_[d] = c_.gpu[d];
    }
    gpu_domains_.assign(members.size(), Domain{1.0, 0, 0, 0, {}});
  }

  done_.assign(n, 0);
  r_.start_s.assign(n, 0.0);
  r_.end_s.assign(n, 0.0);
  r_.devices.assign(D, {});
  r_.links.clear();
  for (const Channel& ch : channels_) r_.links.push_back(LinkStats{ch.src, ch.dst, 0, 0});
  r_.memory.assign(D, {});
  for (int32_t d = 0; d < D; ++d) r_.memory[d].reserve(s_.programs[d].size() + 2);
  memory_now_.assign(D, 0);
  for (int32_t d = 0; d < D; ++d) Memory(d, c_.static_bytes[d], kNone);
}

void Simulator::Memory(int32_t device, double delta, int32_t op) {
  double& now = memory_now_[device];
  now += delta;
  auto& samples = r_.memory[device];
  if (!samples.empty() && samples.back().first == now_) {
    samples.back().second = now;
  } else {
    samples.emplace_back(now_, now);
  }
  DeviceStats& stats = r_.devices[device];
  if (now > stats.peak_memory_bytes) {
    stats.peak_memory_bytes = now;
    stats.peak_op = op;
  }
}

int32_t Simulator::StartNext(Engine& e) {
  if (e.busy || e.head == e.ops.size()) return kNone;
  const int32_t id = e.ops[e.head];
  OpState& st = st_[id];
  if (st.unmet > 0) return kNone;
  e.busy = true;
  r_.start_s[id] = now_;
  st.pred = Later(e.head > 0 ? e.ops[e.head - 1] : kNone, st.last_dep);
  return id;
}

void Simulator::TryCompute(int32_t device) {
  const int32_t id = StartNext(compute_[device]);
  if (id == kNone) return;
  if (const double m = MemoryAtStart(deps_, c_, *op_[id]); m != 0) Memory(device, m, id);
  const double d = Duration(*op_[id]);
  if (shared_gpu_[device] != kNone && d > 0) {
    // Busy and span are charged at its end, when its stretched length is known.
    DomainJoin(true, shared_gpu_[device], id, d);
    return;
  }
  r_.devices[device].busy_s += d;
  TouchSpan(r_.devices[device], now_, now_ + d);
  Push(now_ + d, kComputeEnd, id);
}

void Simulator::EndCompute(int32_t id) {
  const Info& op = info_[id];
  if (shared_gpu_[op.device] != kNone) {
    r_.devices[op.device].busy_s += now_ - r_.start_s[id];
    TouchSpan(r_.devices[op.device], r_.start_s[id], now_);
  }
  compute_[op.device].busy = false;
  ++compute_[op.device].head;
  if (const double m = MemoryAtEnd(deps_, c_, *op_[id]); m != 0) Memory(op.device, m, id);
  in_flight_.Ended(op.kind, op.stage);
  Complete(id);
  TryCompute(op.device);
}

void Simulator::TryAllReduce(int32_t device) {
  const int32_t id = StartNext(allreduce_[device]);
  if (id == kNone) return;
  Push(now_ + Duration(*op_[id]), kAllReduceEnd, id);
}

void Simulator::TryChannel(int32_t ch) {
  Channel& c = channels_[ch];
  if (c.busy || c.head == c.transfers.size()) return;
  const int32_t t = c.transfers[c.head];
  const Transfer& tr = transfers_[t];
  OpState& send = st_[tr.send];
  if (send.unmet > 0 || tr.recv == kNone) return;  // producer not done, or no receive ever
  c.busy = true;
  OpState& recv = st_[tr.recv];
  r_.start_s[tr.send] = r_.start_s[tr.recv] = now_;
  send.pred = Later(c.head > 0 ? transfers_[c.transfers[c.head - 1]].send : kNone, send.last_dep);
  recv.pred = send.pred;  // the transfer, shown as its receive, follows what released it
  Memory(info_[tr.recv].device, tr.bytes, tr.recv);  // the receive buffer
  StartPhase(t);
}

void Simulator::StartPhase(int32_t t) {
  Transfer& tr = transfers_[t];
  const cost::Link& link = tr.inter ? c_.inter_node_link : c_.link;
  if (tr.phase == 0 && link.contention == cost::Contention::kPerPair) {
    // A channel is its own domain and carries one transfer at a time: no
    // sharing, so the whole transfer is one event.
    tr.phase = link.host_staged ? 3 : 1;
    Push(now_ + cost::TransferTime(link, tr.bytes), kPhaseEnd, t);
    return;
  }
  const int8_t moved = link.host_staged ? 4 : 2;
  const double gather_s = c_.GatherSeconds(tr.bytes);
  if (tr.phase == moved && gather_s > 0) {
    Push(now_ + gather_s, kPhaseEnd, t);
  } else if (tr.phase >= moved) {
    FinishTransfer(t);
  } else if (tr.phase % 2 == 0) {
    Push(now_ + link.latency_s, kPhaseEnd, t);
  } else if (tr.bytes <= 0 || link.bandwidth == std::numeric_limits<double>::infinity()) {
    Push(now_, kPhaseEnd, t);  // nothing to share: done at once
  } else {
    DomainJoin(false, tr.domain, t, tr.bytes);
  }
}

void Simulator::DomainJoin(bool gpu, int32_t d, int32_t member, double work) {
  Domain& dom = (gpu ? gpu_domains_ : domains_)[d];
  if (dom.active.empty()) {
    dom.work = 0;
  } else if (now_ > dom.last_time) {
    dom.work += (now_ - dom.last_time) * dom.bandwidth / static_cast<double>(dom.active.size());
  }
  dom.last_time = now_;
  dom.active.emplace_back(dom.work + work, member);
  std::push_heap(dom.active.begin(), dom.active.end(), std::greater<>());
  DomainReschedule(gpu, d);
}

void Simulator::DomainReschedule(bool gpu, int32_t d) {
  Domain& dom = (gpu ? gpu_domains_ : domains_)[d];
  ++dom.version;
  if (dom.active.empty()) return;
  const double n = static_cast<double>(dom.active.size());
  const double remaining = dom.active.front().first - dom.work;
  Push(now_ + std::max(0.0, remaining) * n / dom.bandwidth, gpu ? kGpuCheck : kDomainCheck, d, dom.version);
}

void Simulator::DomainCheck(bool gpu, int32_t d, uint32_t version) {
  Domain& dom = (gpu ? gpu_domains_ : domains_)[d];
  if (version != dom.version) return;  // superseded by a later join or finish
  if (now_ > dom.last_time) dom.work += (now_ - dom.last_time) * dom.bandwidth / static_cast<double>(dom.active.size());
  dom.last_time = now_;
  // This event was scheduled for the front's finish: it is done, and so is
  // anything that finishes within rounding of it.
  const double limit = dom.active.front().first;
  dom.work = std::max(dom.work, limit);
  std::vector<int32_t> finished;
  while (!dom.active.empty() && dom.active.front().first <= limit * (1 + 1e-12)) {
    std::pop_heap(dom.active.begin(), dom.active.end(), std::greater<>());
    finished.push_back(dom.active.back().second);
    dom.active.pop_back();
  }
  DomainReschedule(gpu, d);
  for (int32_t member : finished) {
    if (gpu) {
      EndCompute(member);
    } else {
      ++transfers_[member].phase;
      StartPhase(member);
    }
  }
}

void Simulator::FinishTransfer(int32_t t) {
  const Transfer& tr = transfers_[t];
  Channel& c = channels_[tr.channel];
  c.busy = false;
  ++c.head;
  LinkStats& link = r_.links[tr.channel];
  link.bytes += static_cast<int64_t>(tr.bytes);
  link.busy_s += now_ - r_.start_s[tr.send];
  Complete(tr.send);
  Complete(tr.recv);
  TryChannel(tr.channel);
}

void Simulator::Complete(int32_t id) {
  r_.end_s[id] = now_;
  done_[id] = 1;
  ++completed_;
  for (int32_t k = dep_offset_[id]; k < dep_offset_[id + 1]; ++k) {
    const int32_t op = dependents_[k];
    OpState& st = st_[op];
    st.last_dep = id;  // completions come in time order: the last is the latest
    if (--st.unmet > 0) continue;
    const Info& o = info_[op];
    if (ir::IsSend(o.kind)) {
      TryChannel(transfers_[st.link].channel);
    } else if (o.kind == OpKind::kAllReduce) {
      TryAllReduce(o.device);
    } else {
      TryCompute(o.device);
    }
  }
}

std::string Simulator::Blocked() const {
  std::vector<int32_t> stuck(compute_.size(), -1);
  for (size_t d = 0; d < compute_.size(); ++d) {
    if (compute_[d].head < compute_[d].ops.size()) stuck[d] = compute_[d].ops[compute_[d].head];
  }
  return DescribeBlocked(deps_, stuck, done_);
}

Result<SimResult> Simulator::Run() {
  Build();
  for (int32_t d = 0; d < s_.num_devices; ++d) {
    TryCompute(d);
    TryAllReduce(d);
  }
  for (size_t id = 0; id < op_.size(); ++id) {
    if (ir::IsSend(op_[id]->kind) && st_[id].unmet == 0) TryChannel(transfers_[st_[id].link].channel);
  }
  while (!events_.empty()) {
    const Event ev = events_.top();
    events_.pop();
    now_ = ev.time;
    switch (ev.type) {
      case kComputeEnd: EndCompute(ev.a); break;
      case kAllReduceEnd: {
        const Info& op = info_[ev.a];
        allreduce_[op.device].busy = false;
        ++allreduce_[op.device].head;
        Complete(ev.a);
        TryAllReduce(op.device);
        break;
      }
      case kPhaseEnd: {
        Transfer& tr = transfers_[ev.a];
        ++tr.phase;
        StartPhase(ev.a);
        break;
      }
      case kDomainCheck: DomainCheck(false, ev.a, ev.b); break;
      case kGpuCheck: DomainCheck(true, ev.a, ev.b); break;
    }
  }
  if (completed_ != static_cast<int64_t>(op_.size())) {
    return FailRuntime(fmt::format("the schedule cannot progress at t={} s: {}", now_, Blocked()));
  }
  r_.peak_in_flight = in_flight_.TakePeak();
  const int32_t last_op = FinishStep(r_, s_.num_devices);
  for (int32_t op = last_op; op != kNone; op = st_[op].pred) r_.critical_path.push_back(op);
  std::reverse(r_.critical_path.begin(), r_.critical_path.end());
  return std::move(r_);
}

}  // namespace

namespace {

// Checks the costs' shape; renumbers a copy when the ids are not canonical.
template <typename Engine>
Result<SimResult> Checked(const ir::Schedule& schedule, const PlanCosts& costs, Engine engine) {
  const int32_t K = schedule.num_stages, D = schedule.num_devices;
  if (static_cast<int32_t>(costs.compute_s.size()) != K || static_cast<int32_t>(costs.activation_bytes.size()) != K ||
      static_cast<int32_t>(costs.input_bytes.size()) != K || static_cast<int32_t>(costs.step_s.size()) != D ||
      static_cast<int32_t>(costs.static_bytes.size()) != D ||
      (!costs.pending_bytes.empty() && static_cast<int32_t>(costs.pending_bytes.size()) != K) ||
      (!costs.rebuilt_bytes.empty() && static_cast<int32_t>(costs.rebuilt_bytes.size()) != K)) {
    return Fail(fmt::format("costs describe the wrong shape: need {} stages and {} devices", K, D));
  }
  int32_t expected = 0;
  for (const auto& program : schedule.programs) {
    for (const Op& op : program) {
      if (op.id != expected++) {
        ir::Schedule copy = schedule;
        ir::Renumber(copy);
        return engine(copy, costs);
      }
    }
  }
  return engine(schedule, costs);
}

}  // namespace

Result<SimResult> SimulateEventDriven(const ir::Schedule& schedule, const PlanCosts& costs) {
  return Checked(schedule, costs, [](const ir::Schedule& s, const PlanCosts& c) { return Simulator(s, c).Run(); });
}

namespace {

// Whether, in a run that gave every transfer its link's whole bandwidth, no
// two transfers that share a domain (a sender's port, the host) were ever
// under way at once: then sharing never happened and the run is the
// event-driven engine's, but for rounding. Each transfer counts from its
// start to the end of its last byte (latency included: conservative).
bool NothingShared(const ir::Schedule& s, const PlanCosts& c, const SimResult& r) {
  struct Span {
    double begin, end;
  };
  // Per link (inside a node, between nodes) and domain: its transfers.
  std::vector<std::vector<Span>> spans(2 * static_cast<size_t>(s.num_devices));
  for (int32_t d = 0; d < s.num_devices; ++d) {
    for (const Op& op : s.programs[d]) {
      if (!ir::IsSend(op.kind)) continue;
      const cost::Link& link = c.LinkBetween(d, op.peer);
      if (link.contention == cost::Contention::kPerPair) continue;
      if (op.bytes <= 0 || link.bandwidth == std::numeric_limits<double>::infinity()) continue;
      const size_t domain = link.contention == cost::Contention::kHost ? 0 : static_cast<size_t>(d);
      const double begin = r.start_s[op.id];
      spans[(&link == &c.link ? 0 : s.num_devices) + domain].push_back(
          {begin, begin + cost::TransferTime(link, static_cast<double>(op.bytes))});
    }
  }
  auto earlier = [](const Span& a, const Span& b) { return a.begin < b.begin; };
  for (auto& list : spans) {
    // A device's sends mostly start in program order: often nothing to sort.
    if (!std::is_sorted(list.begin(), list.end(), earlier)) std::sort(list.begin(), list.end(), earlier);
    double busy_until = -std::numeric_limits<double>::infinity();
    for (const Span& span : list) {
      if (span.begin < busy_until) return false;
      busy_until = std::max(busy_until, span.end);
    }
  }
  return true;
}

}  // namespace

Result<SimResult> Simulate(const ir::Schedule& schedule, const PlanCosts& costs, const SimOptions& options) {
  auto in_order = [&](const ir::Schedule& s, const PlanCosts& c) { return SimulateInOrder(s, c, options); };
  // Devices sharing a GPU: only the event-driven engine shares it.
  if (!costs.gpu.empty()) return SimulateEventDriven(schedule, costs);
  if (costs.Unshared() || costs.comm_on_compute_stream) return Checked(schedule, costs, in_order);
  // Shared links where transfers rarely meet (a pipeline's sends between
  // nodes, far apart next to its compute): the fast engine's run stands
  // where no two of them met.
  auto r = Checked(schedule, costs, in_order);
  if (r && NothingShared(schedule, costs, *r)) return r;
  return SimulateEventDriven(schedule, costs);
}

std::optional<MemoryOverflow> FirstOverflow(const cost::Config& c, const SimResult& r) {
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const double capacity = c.cluster.devices[d].memory_bytes;
    if (r.devices[d].peak_memory_bytes > capacity) {
      return MemoryOverflow{static_cast<int>(d), r.devices[d].peak_memory_bytes, capacity};
    }
  }
  return std::nullopt;
}

}  // namespace twinpipe::simulate
