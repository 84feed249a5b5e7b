#include "ir/verifier.h"

#include <algorithm>
#include <array>
#include <optional>

#include <fmt/format.h>

#include "ir/channels.h"
#include "ir/op_table.h"

namespace twinpipe::ir {
namespace {

struct Where {
  int32_t device = -1;
  int32_t position = -1;
  bool found() const { return device >= 0; }
};

// Where each op of a (stage, micro-batch) sits: a position in its stage's
// device program (ops of a stage live on the stage's device, checked before
// indexing).
class OpIndex {
 public:
  OpIndex(const std::vector<int32_t>& placement, int32_t micro_batches)
      : placement_(placement), table_(static_cast<int32_t>(placement.size()), micro_batches) {}
  int32_t& position(OpKind kind, int32_t stage, int32_t micro_batch) { return table_.slot(kind, stage, micro_batch); }
  Where at(OpKind kind, int32_t stage, int32_t micro_batch) const {
    const int32_t p = table_.at(kind, stage, micro_batch);
    return p < 0 ? Where{} : Where{placement_[stage], p};
  }

 private:
  const std::vector<int32_t>& placement_;
  OpTable<> table_;
};

class Checker {
 public:
  explicit Checker(const Schedule& s) : s_(s) {}

  std::vector<Diagnostic> Run() {
    if (!CheckShape()) return std::move(out_);
    // Every (stage, micro-batch) needs a forward and a backward: a header
    // that declares more pairs than there are ops is wrong, and walking its
    // pairs could take forever (2^24 x 2^24).
    const int64_t pairs = int64_t{s_.num_stages} * s_.num_micro_batches;
    if (pairs > s_.NumOps()) {
      out_.push_back(Diagnostic{-1, -1, fmt::format("{} stages x {} micro-batches need {} forwards and as many "
                                                    "backwards, but the schedule holds {} ops in all",
                                                    s_.num_stages, s_.num_micro_batches, pairs, s_.NumOps())});
      return std::move(out_);
    }
    OpIndex index(s_.placement, s_.num_micro_batches);
    CheckOps(index);
    CheckOverlapPairs();
    if (!out_.empty()) return std::move(out_);
    CheckCountsAndOrder(index);
    CheckPairing(index);
    if (!out_.empty()) return std::move(out_);
    CheckFifoAndDeadlock();
    return std::move(out_);
  }

 private:
  const Op& OpAt(Where w) const { return s_.programs[w.device][w.position]; }

  void Report(int32_t device, int32_t position, std::string message) {
    out_.push_back(Diagnostic{device, position, std::move(message)});
  }
  void Report(Where w, std::string message) {
    Report(w.device, w.position, std::move(message));
  }
  std::string Describe(Where w) const {
    return fmt::format("{} (device {}, position {})", OpToken(OpAt(w)), w.device, w.position);
  }
  static std::string Token(OpKind kind, int32_t stage, int32_t micro_batch) {
    return OpToken(Op{.kind = kind, .stage = stage, .micro_batch = micro_batch});
  }

  bool CheckShape() {
    const int32_t D = static_cast<int32_t>(s_.programs.size());
    if (s_.num_stages < 1) Report(-1, -1, fmt::format("stages must be at least 1, got {}", s_.num_stages));
    if (s_.num_micro_batches < 1) {
      Report(-1, -1, fmt::format("micro-batches must be at least 1, got {}", s_.num_micro_batches));
    }
    if (s_.replicas < 1) Report(-1, -1, fmt::format("replicas must be at least 1, got {}", s_.replicas));
    if (s_.num_devices != D) {
      Report(-1, -1, fmt::format("schedule declares {} devices but has {} programs", s_.num_devices, D));
    }
    if (static_cast<int32_t>(s_.placement.size()) != s_.num_stages) {
      Report(-1, -1, fmt::format("placement lists {} stages, expected {}", s_.placement.size(),
                                 s_.num_stages));
    } else {
      for (int32_t st = 0; st < s_.num_stages; ++st) {
        if (s_.placement[st] < 0 || s_.placement[st] >= D) {
          Report(-1, -1, fmt::format("stage {} is placed on device {}, expected 0..{}", st,
                                     s_.placement[st], D - 1));
        }
      }
    }
    return out_.empty();
  }

  // Ids, fields in range, placement, peers, duplicates; fills the index and
  // what CheckStepOrder needs, in one pass over the ops (a large schedule
  // does not fit in the cache: each pass costs memory bandwidth).
  void CheckOps(OpIndex& index) {
    const int32_t K = s_.num_stages, M = s_.num_micro_batches;
    const int32_t D = static_cast<int32_t>(s_.programs.size());
    all_reduce_.assign(K, Where{});
    steps_.assign(D, {});
    last_backward_.assign(K, -1);
    last_any_.assign(D, -1);
    // Ids are canonical: 0..N-1 in program order, device by device (readers
    // and passes renumber). Consumers index arrays by id, so any other id is
    // refused here rather than trusted there. The first misnumbered op is
    // reported, first; the rest follow from it.
    int32_t expected = 0;
    std::optional<Diagnostic> bad_id;
    const size_t reported_before = out_.size();
    for (int32_t d = 0; d < D; ++d) {
      const auto& program = s_.programs[d];
      for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i, ++expected) {
        const Op& op = program[i];
        if (op.id != expected && !bad_id) {
          bad_id = Diagnostic{d, i, fmt::format("op id {}, expected {} (ids are 0..N-1 in program order; see Renumber)",
                                                op.id, expected)};
        }
        if (op.device != d) {
          Report(d, i, fmt::format("op says device {} but sits in device {}'s program", op.device, d));
        }
        if (op.bytes < 0) Report(d, i, fmt::format("negative bytes {}", op.bytes));
        if (op.kind == OpKind::kStep) {
          steps_[d].push_back(i);
          if (steps_[d].size() == 2) Report(d, i, "second STEP on this device (one per mini-batch)");
          continue;
        }
        if (op.stage < 0 || op.stage >= K) {
          Report(d, i, fmt::format("stage {} out of range 0..{}", op.stage, K - 1));
          continue;
        }
        if (HasMicroBatch(op.kind) && (op.micro_batch < 0 || op.micro_batch >= M)) {
          Report(d, i, fmt::format("micro-batch {} out of range 0..{}", op.micro_batch, M - 1));
          continue;
        }
        if (s_.placement[op.stage] != d) {
          Report(d, i, fmt::format("stage {} on two devices: it is placed on device {}, but this op "
                                   "runs on device {}",
                                   op.stage, s_.placement[op.stage], d));
          continue;
        }
        if (IsComm(op.kind) && !CheckPeer(d, i, op)) continue;
        if (op.kind == OpKind::kAllReduce) {
          last_any_[d] = i;
          if (s_.replicas < 2) {
            Report(d, i, "ALLREDUCE in a schedule with one replica (nothing to reduce with)");
          } else if (all_reduce_[op.stage].found()) {
            Report(d, i, fmt::format("duplicate op: also at {}", Describe(all_reduce_[op.stage])));
          } else {
            all_reduce_[op.stage] = Where{d, i};
          }
          continue;
        }
        int32_t& slot = index.position(op.kind, op.stage, op.micro_batch);
        if (slot >= 0) {
          Report(d, i, fmt::format("duplicate op: also at position {}", slot));
          continue;
        }
        slot = i;
        if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput || op.kind == OpKind::kBackwardWeight) {
          last_backward_[op.stage] = i;
          last_any_[d] = i;
        }
      }
    }
    if (bad_id) out_.insert(out_.begin() + static_cast<ptrdiff_t>(reported_before), *bad_id);
  }

  bool CheckPeer(int32_t d, int32_t i, const Op& op) {
    const int32_t K = s_.num_stages;
    const bool forward_dir = op.kind == OpKind::kSendF || op.kind == OpKind::kRecvB;
    const int32_t other = forward_dir ? op.stage + 1 : op.stage - 1;
    if (other < 0 || other >= K) {
      Report(d, i, fmt::format("{} of stage {} has no stage {} to talk to", OpKindName(op.kind),
                               op.stage, other));
      return false;
    }
    const int32_t peer = s_.placement[other];
    if (peer == d) {
      Report(d, i, fmt::format("comm between stages {} and {}, which are both on device {}",
                               op.stage, other, d));
      return false;
    }
    if (op.peer != peer) {
      Report(d, i, fmt::format("peer is device {}, but stage {} is placed on device {}", op.peer,
                               other, peer));
      return false;
    }
    return true;
  }

  void CheckCountsAndOrder(const OpIndex& index) {
    const int32_t K = s_.num_stages, M = s_.num_micro_batches;
    for (int32_t st = 0; st < K; ++st) {
      const int32_t dev = s_.placement[st];
      for (int32_t m = 0; m < M; ++m) {
        const Where f = index.at(OpKind::kForward, st, m);
        const Where b = index.at(OpKind::kBackward, st, m);
        const Where in = index.at(OpKind::kBackwardInput, st, m);
        const Where w = index.at(OpKind::kBackwardWeight, st, m);
        const Where r = index.at(OpKind::kRecompute, st, m);
        if (!f.found()) {
          Report(dev, -1, fmt::format("missing forward {}", Token(OpKind::kForward, st, m)));
        }
        if (b.found() && in.found()) {
          Report(in, fmt::format("both a full backward {} and an input backward", Describe(b)));
        }
        if (b.found() && w.found()) {
          Report(w, fmt::format("weight backward as well as a full backward {}", Describe(b)));
        } else if (w.found() && !in.found()) {
          Report(w, fmt::format("W without I: no {} computes the input gradient first",
                                Token(OpKind::kBackwardInput, st, m)));
        }
        if (in.found() && !w.found()) {
          Report(in, fmt::format("I without W: the weight gradient {} is never computed",
                                 Token(OpKind::kBackwardWeight, st, m)));
        }
        if (!b.found() && !in.found() && !w.found()) {
          Report(dev, -1, fmt::format("missing backward {} (or {} and {})",
                                      Token(OpKind::kBackward, st, m),
                                      Token(OpKind::kBackwardInput, st, m),
                                      Token(OpKind::kBackwardWeight, st, m)));
        }
        if (r.found() && !b.found() && !in.found()) {
          Report(r, "recompute with no backward to use it");
        }
        CheckPairOrder(index, st, m);
      }
    }
    // With replicas, each stage averages its gradients once, or its
    // replicas would drift apart.
    if (s_.replicas >= 2) {
      for (int32_t st = 0; st < K; ++st) {
        if (!all_reduce_[st].found()) {
          Report(s_.placement[st], -1,
                 fmt::format("missing {}ALLREDUCE: {} replicas, and stage {} never averages its gradients across "
                             "them", st, s_.replicas, st));
        }
      }
    }
    CheckStepOrder();
  }

  // `first` must come before `second` on one device (both on the same device
  // by placement); reports at `second`.
  void Before(Where first, Where second, const char* what) {
    if (!first.found() || !second.found()) return;
    if (first.position > second.position) {
      Report(second, fmt::format("{} {}", what, Describe(first)));
    }
  }

  void CheckPairOrder(const OpIndex& index, int32_t st, int32_t m) {
    const int32_t K = s_.num_stages;
    const Where f = index.at(OpKind::kForward, st, m);
    Where back = index.at(OpKind::kBackward, st, m);
    if (!back.found()) back = index.at(OpKind::kBackwardInput, st, m);
    const Where w = index.at(OpKind::kBackwardWeight, st, m);
    const Where r = index.at(OpKind::kRecompute, st, m);
    Before(f, back, "backward before its forward");
    Before(f, r, "recompute before its forward");
    Before(r, back, "backward before its recompute");
    Before(index.at(OpKind::kBackwardInput, st, m), w, "W before its I");
    Before(f, index.at(OpKind::kSendF, st, m), "sends the activation before computing it in");
    Before(index.at(OpKind::kRecvF, st, m), f, "forward before receiving its input in");
    Before(back, index.at(OpKind::kSendB, st, m), "sends the gradient before computing it in");
    Before(index.at(OpKind::kRecvB, st, m), back, "backward before receiving its gradient in");
    // Neighbouring stages on one device: data flows in program order.
    if (st > 0 && s_.placement[st - 1] == s_.placement[st]) {
      Before(index.at(OpKind::kForward, st - 1, m), f, "forward before the forward of its input");
    }
    if (st + 1 < K && s_.placement[st + 1] == s_.placement[st]) {
      Where next = index.at(OpKind::kBackward, st + 1, m);
      if (!next.found()) next = index.at(OpKind::kBackwardInput, st + 1, m);
      Before(next, back, "backward before the backward of its output gradient");
    }
  }

  // ALLREDUCE after every backward of its stage; STEP after every backward
  // and all-reduce of its device; and a STEP on every device that holds a
  // stage (else its parameters are never updated).
  // A paired F overlaps the next input backward (B or I) of its device:
  // only comm ops and recomputes may come between them.
  void CheckOverlapPairs() {
    for (int32_t d = 0; d < static_cast<int32_t>(s_.programs.size()); ++d) {
      const auto& program = s_.programs[d];
      for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
        if (!program[i].paired) continue;
        if (program[i].kind != OpKind::kForward) {
          Report(d, i, "only a forward pairs with a backward (OVERLAP_F_B)");
          continue;
        }
        const auto j = static_cast<int32_t>(PairPartner(program, i));
        if (j == static_cast<int32_t>(program.size())) {
          Report(d, i, "a paired forward needs a B or I after it to overlap with, and its program ends");
        } else if (!IsInputBackward(program[j].kind)) {
          Report(d, i, fmt::format("a paired forward overlaps the next B or I, but {} (position {}) comes first",
                                   OpToken(program[j]), j));
        }
      }
    }
  }

  void CheckStepOrder() {
    const int32_t K = s_.num_stages, D = static_cast<int32_t>(s_.programs.size());
    std::vector<char> holds_stage(D, 0);
    for (int32_t st = 0; st < K; ++st) holds_stage[s_.placement[st]] = 1;
    for (int32_t d = 0; d < D; ++d) {
      if (holds_stage[d] && steps_[d].empty()) {
        Report(d, -1, "missing STEP: the device holds stages but never applies their gradients");
      }
    }
    // Per device, in program order: its all-reduces and STEPs that come too early.
    std::vector<std::vector<std::pair<int32_t, std::string>>> early(D);
    for (int32_t st = 0; st < K; ++st) {
      const Where ar = all_reduce_[st];
      if (ar.found() && last_backward_[st] > ar.position) {
        early[ar.device].emplace_back(
            ar.position, fmt::format("all-reduce before the last backward of its stage, {}",
                                     Describe(Where{ar.device, last_backward_[st]})));
      }
    }
    for (int32_t d = 0; d < D; ++d) {
      for (const int32_t i : steps_[d]) {
        if (last_any_[d] > i) early[d].emplace_back(i, fmt::format("STEP before {}", Describe(Where{d, last_any_[d]})));
      }
      std::stable_sort(early[d].begin(), early[d].end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& [i, message] : early[d]) Report(d, i, std::move(message));
    }
  }

  // Each boundary between stages on different devices needs its send and its
  // receive, with equal bytes.
  void CheckPairing(const OpIndex& index) {
    const int32_t K = s_.num_stages, M = s_.num_micro_batches;
    for (int32_t st = 0; st + 1 < K; ++st) {
      const int32_t lo = s_.placement[st], hi = s_.placement[st + 1];
      if (lo == hi) continue;
      for (int32_t m = 0; m < M; ++m) {
        Pair(index.at(OpKind::kForward, st, m), index.at(OpKind::kSendF, st, m),
             index.at(OpKind::kRecvF, st + 1, m), index.at(OpKind::kForward, st + 1, m),
             Op{.kind = OpKind::kSendF, .stage = st, .micro_batch = m},
             Op{.kind = OpKind::kRecvF, .stage = st + 1, .micro_batch = m}, lo, hi);
        Where producer = index.at(OpKind::kBackward, st + 1, m);
        if (!producer.found()) producer = index.at(OpKind::kBackwardInput, st + 1, m);
        Where consumer = index.at(OpKind::kBackward, st, m);
        if (!consumer.found()) consumer = index.at(OpKind::kBackwardInput, st, m);
        Pair(producer, index.at(OpKind::kSendB, st + 1, m), index.at(OpKind::kRecvB, st, m),
             consumer, Op{.kind = OpKind::kSendB, .stage = st + 1, .micro_batch = m},
             Op{.kind = OpKind::kRecvB, .stage = st, .micro_batch = m}, hi, lo);
      }
    }
  }

  // The tokens are built only when something is reported.
  void Pair(Where producer, Where send, Where recv, Where consumer, const Op& send_op,
            const Op& recv_op, int32_t src, int32_t dst) {
    if (send.found() && recv.found()) return;  // bytes are compared in CheckFifoMatch
    if (!send.found() && !recv.found() && (!producer.found() || !consumer.found())) return;
    const std::string send_token = OpToken(send_op), recv_token = OpToken(recv_op);
    if (send.found() && !recv.found()) {
      Report(send, fmt::format("unmatched send: device {} has no {} to receive it", dst, recv_token));
    }
    if (recv.found() && !send.found()) {
      Report(recv, fmt::format("missing send: device {} has no {} for this receive", src, send_token));
    }
    if (!send.found() && producer.found() && consumer.found()) {
      Report(producer, fmt::format("missing send: the result goes to device {} but no {} follows",
                                   dst, send_token));
    }
    if (!recv.found() && consumer.found() && producer.found()) {
      Report(consumer, fmt::format("missing recv: needs {} from device {} before it", recv_token, src));
    }
  }

  // Per channel (ir/channels.h), the state of the deadlock run: the k-th send
  // from a to b must match the k-th receive on b from a and carry the same bytes.
  struct ChannelRun {
    int32_t sent = 0;            // sends issued so far
    int32_t received = 0;        // receives completed so far
    int32_t waiter = -1;         // device blocked on this channel, if any
    bool reported = false;       // first FIFO mismatch already reported
  };

  static bool Matches(const Op& send, const Op& recv) {
    if (send.micro_batch != recv.micro_batch) return false;
    if (send.kind == OpKind::kSendF) return recv.kind == OpKind::kRecvF && recv.stage == send.stage + 1;
    return recv.kind == OpKind::kRecvB && recv.stage == send.stage - 1;
  }

  // A receive pairs with its channel's next send in FIFO order.
  void CheckFifoMatch(const Channel& c, ChannelRun& run, int32_t recv_position) {
    const int32_t k = run.received;
    // Ids are canonical here: a device's ops are numbered from its first.
    const int32_t send_position = c.sends[k] - s_.programs[c.src].front().id;
    const Op& send = s_.programs[c.src][send_position];
    const Op& recv = s_.programs[c.dst][recv_position];
    if (!Matches(send, recv)) {
      if (!run.reported) {
        Report(c.dst, recv_position,
               fmt::format("receives from device {} out of order: this is receive #{} from it, "
                           "but device {}'s send #{} to device {} is {}",
                           c.src, k, c.src, k, c.dst, Describe(Where{c.src, send_position})));
      }
      run.reported = true;
    } else if (send.bytes != recv.bytes) {
      Report(c.dst, recv_position,
             fmt::format("bytes mismatch: receives {} bytes but {} sends {}", recv.bytes,
                         Describe(Where{c.src, send_position}), send.bytes));
    }
  }

  // Runs every device until it blocks on a receive whose send is not issued,
  // matching each receive to its send in FIFO order on the way.
  void CheckFifoAndDeadlock() {
    const int32_t D = static_cast<int32_t>(s_.programs.size());
    const Channels channels(s_);
    std::vector<ChannelRun> runs(channels.size());
    std::vector<int32_t> pc(D, 0);
    std::vector<int32_t> ready;
    ready.reserve(D);
    for (int32_t d = D - 1; d >= 0; --d) ready.push_back(d);
    while (!ready.empty()) {
      const int32_t d = ready.back();
      ready.pop_back();
      const auto& program = s_.programs[d];
      int32_t i = pc[d];
      for (; i < static_cast<int32_t>(program.size()); ++i) {
        const Op& op = program[i];
        if (IsSend(op.kind)) {
          ChannelRun& c = runs[channels.Find(d, op.peer)];
          if (++c.sent > c.received && c.waiter >= 0) {
            ready.push_back(c.waiter);
            c.waiter = -1;
          }
        } else if (IsRecv(op.kind)) {
          const int32_t id = channels.Find(op.peer, d);
          ChannelRun& c = runs[id];
          if (c.sent <= c.received) {
            c.waiter = d;
            break;
          }
          CheckFifoMatch(channels[id], c, i);
          ++c.received;
        }
      }
      pc[d] = i;
    }
    // Stuck devices each wait on a sender; following those waits finds a cycle.
    int32_t start = -1;
    for (int32_t d = 0; d < D; ++d) {
      if (pc[d] < static_cast<int32_t>(s_.programs[d].size())) {
        start = d;
        break;
      }
    }
    if (start < 0) return;
    std::vector<int32_t> seen_at(D, -1);
    std::vector<int32_t> path;
    int32_t d = start;
    while (d >= 0 && seen_at[d] < 0) {
      seen_at[d] = static_cast<int32_t>(path.size());
      path.push_back(d);
      const int32_t next = s_.programs[d][pc[d]].peer;
      d = pc[next] < static_cast<int32_t>(s_.programs[next].size()) ? next : -1;
    }
    if (d < 0) {
      const int32_t last = path.back();
      Report(last, pc[last], "deadlock: waits for a send that is never issued");
      return;
    }
    std::vector<std::string> links;
    for (size_t k = static_cast<size_t>(seen_at[d]); k < path.size(); ++k) {
      const int32_t dev = path[k];
      const int32_t peer = s_.programs[dev][pc[dev]].peer;
      links.push_back(fmt::format("device {} waits at position {} ({}) for device {}, blocked at "
                                  "position {} ({})",
                                  dev, pc[dev], OpToken(s_.programs[dev][pc[dev]]), peer, pc[peer],
                                  OpToken(s_.programs[peer][pc[peer]])));
    }
    int32_t stuck = 0;
    for (int32_t x = 0; x < D; ++x) stuck += pc[x] < static_cast<int32_t>(s_.programs[x].size());
    Report(d, pc[d], fmt::format("deadlock: {}{}", fmt::join(links, "; "),
                                 stuck > static_cast<int32_t>(links.size())
                                     ? fmt::format(" ({} devices blocked in all)", stuck)
                                     : ""));
  }

  const Schedule& s_;
  std::vector<Diagnostic> out_;
  std::vector<Where> all_reduce_;
  std::vector<std::vector<int32_t>> steps_;  // per device: its STEPs' positions
  std::vector<int32_t> last_backward_;       // per stage: its last backward's position
  std::vector<int32_t> last_any_;            // per device: its last backward's or all-reduce's position
};

}  // namespace

std::vector<Diagnostic> Verify(const Schedule& schedule) { return Checker(schedule).Run(); }

std::string FormatDiagnostic(const Schedule& schedule, const Diagnostic& d) {
  if (d.device < 0) return d.message;
  if (d.position < 0 || d.device >= static_cast<int32_t>(schedule.programs.size()) ||
      d.position >= static_cast<int32_t>(schedule.programs[d.device].size())) {
    return fmt::format("device {}: {}", d.device, d.message);
  }
  return fmt::format("device {}, position {} ({}): {}", d.device, d.position,
                     OpToken(schedule.programs[d.device][d.position]), d.message);
}

}  // namespace twinpipe::ir
