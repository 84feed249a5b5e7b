#include "ir/passes.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <fmt/format.h>

namespace twinpipe::ir {

std::string_view RecomputeModeName(RecomputeMode mode) {
  switch (mode) {
    case RecomputeMode::kNone: return "none";
    case RecomputeMode::kFull: return "full";
    case RecomputeMode::kExceptLast: return "except-last";
    case RecomputeMode::kSelective: return "selective";
  }
  return "none";
}

std::optional<RecomputeMode> RecomputeModeFromName(std::string_view name) {
  if (name == "none") return RecomputeMode::kNone;
  if (name == "full") return RecomputeMode::kFull;
  if (name == "except-last") return RecomputeMode::kExceptLast;
  if (name == "selective") return RecomputeMode::kSelective;
  return std::nullopt;
}

void InsertRecompute(Schedule& schedule, RecomputeMode mode) {
  if (!InsertsRecompute(mode)) return;
  const int32_t M = schedule.num_micro_batches;
  // Pairs that already have an R are left alone.
  std::vector<char> has_recompute(static_cast<size_t>(schedule.num_stages) * M, 0);
  auto key = [M](const Op& op) { return static_cast<size_t>(op.stage) * M + op.micro_batch; };
  auto valid = [&](const Op& op) {
    return op.stage >= 0 && op.stage < schedule.num_stages && op.micro_batch >= 0 &&
           op.micro_batch < M;
  };
  for (const auto& program : schedule.programs) {
    for (const Op& op : program) {
      if (op.kind == OpKind::kRecompute && valid(op)) has_recompute[key(op)] = 1;
    }
  }
  for (auto& program : schedule.programs) {
    std::vector<Op> out;
    out.reserve(program.size() * 3 / 2);
    for (const Op& op : program) {
      const bool wanted = IsInputBackward(op.kind) && valid(op) && !has_recompute[key(op)] &&
                          !(mode == RecomputeMode::kExceptLast && op.micro_batch == M - 1);
      if (wanted) {
        size_t at = out.size();
        while (at > 0 && IsRecv(out[at - 1].kind)) --at;
        Op r{.kind = OpKind::kRecompute, .device = op.device, .stage = op.stage,
             .micro_batch = op.micro_batch};
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), r);
        has_recompute[key(op)] = 1;
      }
      out.push_back(op);
    }
    program = std::move(out);
  }
  Renumber(schedule);
}

namespace {

// One boundary transfer: sent right after its producer, received before its
// consumer. The ops are made from these fields when the programs are merged.
struct Message {
  int32_t dst;       // receiving device
  int32_t producer;  // index of the producing op in the sender's program
  int32_t consumer;  // index of the consuming op in the receiver's program
  int32_t stage;     // sending stage
  int32_t micro_batch;
  bool forward;      // activation (SEND_F/RECV_F) or gradient (SEND_B/RECV_B)
  int64_t bytes;
};

struct PendingRecv {
  int32_t before;  // insert before this index of the receiver's program
  int32_t src;
  int32_t order;    // position in the channel's FIFO
  int32_t message;  // index into the sender's outgoing messages
};

int64_t BoundaryBytes(const std::vector<int64_t>& v, int32_t boundary) {
  return boundary < static_cast<int32_t>(v.size()) ? v[boundary] : 0;
}

// Receives before one op are posted by source device, then FIFO position.
bool RecvOrder(const PendingRecv& a, const PendingRecv& b) {
  if (a.before != b.before) return a.before < b.before;
  if (a.src != b.src) return a.src < b.src;
  return a.order < b.order;
}

Op SendOp(const Message& m, int32_t src) {
  return Op{.kind = m.forward ? OpKind::kSendF : OpKind::kSendB, .device = src, .stage = m.stage,
            .micro_batch = m.micro_batch, .peer = m.dst, .bytes = m.bytes};
}

Op RecvOp(const Message& m, int32_t src) {
  return Op{.kind = m.forward ? OpKind::kRecvF : OpKind::kRecvB, .device = m.dst,
            .stage = m.forward ? m.stage + 1 : m.stage - 1, .micro_batch = m.micro_batch,
            .peer = src, .bytes = m.bytes};
}

}  // namespace

std::string_view RecomputeTimingName(RecomputeTiming timing) {
  return timing == RecomputeTiming::kInBackward ? "in-backward" : "overlapped";
}

std::optional<RecomputeTiming> RecomputeTimingFromName(std::string_view name) {
  if (name == "overlapped") return RecomputeTiming::kOverlapped;
  if (name == "in-backward") return RecomputeTiming::kInBackward;
  return std::nullopt;
}

Result<void> InsertComm(Schedule& s, const CommBytes& bytes, RecomputeTiming timing) {
  const int32_t K = s.num_stages;
  const int32_t M = s.num_micro_batches;
  const int32_t D = static_cast<int32_t>(s.programs.size());
  if (static_cast<int32_t>(s.placement.size()) != K) {
    return Fail(fmt::format("placement lists {} stages, schedule has {}", s.placement.size(), K));
  }
  for (int32_t st = 0; st < K; ++st) {
    if (s.placement[st] < 0 || s.placement[st] >= D) {
      return Fail(fmt::format("stage {} is placed on device {}, which does not exist", st,
                              s.placement[st]));
    }
  }
  auto in_range = [&](const Op& op) {
    return op.stage >= 0 && op.stage < K && op.micro_batch >= 0 && op.micro_batch < M;
  };
  // Where each activation's and each gradient's consumer sits in its
  // device's program: F; the input backward (B or I), or R when it runs
  // inside the backward.
  std::vector<int32_t> pos_forward(static_cast<size_t>(K) * M, -1);
  std::vector<int32_t> pos_gradient(static_cast<size_t>(K) * M, -1);
  for (int32_t d = 0; d < D; ++d) {
    const auto& program = s.programs[d];
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      const Op& op = program[i];
      if (IsComm(op.kind)) {
        return Fail(fmt::format("device {} position {} ({}): schedule already has comm ops", d,
                                i, OpToken(op)));
      }
      if (!in_range(op)) continue;
      const size_t k = static_cast<size_t>(op.stage) * M + op.micro_batch;
      if (op.kind == OpKind::kForward) pos_forward[k] = i;
      if (IsInputBackward(op.kind) && pos_gradient[k] < 0) pos_gradient[k] = i;
      if (op.kind == OpKind::kRecompute && timing == RecomputeTiming::kInBackward) pos_gradient[k] = i;
    }
  }
  // A paired F and its input backward run as one (OVERLAP_F_B): the
  // receives either needs come before the F, the sends either makes after
  // the backward. pair_start[d][i]: where op i's receives go; pair_end: its sends.
  std::vector<std::vector<int32_t>> pair_start(D), pair_end(D);
  for (int32_t d = 0; d < D; ++d) {
    const auto& program = s.programs[d];
    const auto n = static_cast<int32_t>(program.size());
    for (int32_t i = 0; i < n; ++i) {
      if (!program[i].paired) continue;
      const auto j = static_cast<int32_t>(PairPartner(program, i));  // no comm ops yet: past recomputes
      if (j == n || !IsInputBackward(program[j].kind)) {
        return Fail(fmt::format("device {} position {} ({}): a paired forward needs its device's next op (recomputes "
                                "aside) to be a B or I", d, i, OpToken(program[i])));
      }
      if (pair_start[d].empty()) {
        pair_start[d].resize(n);
        pair_end[d].resize(n);
        for (int32_t k = 0; k < n; ++k) pair_start[d][k] = pair_end[d][k] = k;
      }
      for (int32_t k = i + 1; k <= j; ++k) pair_start[d][k] = i;
      pair_end[d][i] = j;
    }
  }
  auto consumer_of = [&](const std::vector<int32_t>& pos, int32_t stage, int32_t m, int32_t dst) {
    const int32_t p = pos[static_cast<size_t>(stage) * M + m];
    if (p < 0) return static_cast<int32_t>(s.programs[dst].size());
    // (A consumer found on another device than its stage's, which the
    // verifier refuses, may lie beyond this program.)
    const auto& starts = pair_start[dst];
    return static_cast<size_t>(p) < starts.size() ? starts[p] : p;
  };
  auto producer_of = [&](int32_t d, int32_t i) { return pair_end[d].empty() ? i : pair_end[d][i]; };

  // Messages per sender, in the sender's program order (at most one per op).
  std::vector<std::vector<Message>> outgoing(D);
  for (int32_t d = 0; d < D; ++d) {
    const auto& program = s.programs[d];
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      const Op& op = program[i];
      if (!in_range(op)) continue;
      const int32_t st = op.stage, m = op.micro_batch;
      if (op.kind == OpKind::kForward && st + 1 < K && s.placement[st + 1] != d) {
        const int32_t dst = s.placement[st + 1];
        outgoing[d].push_back(Message{dst, producer_of(d, i), consumer_of(pos_forward, st + 1, m, dst), st, m, true,
                                      BoundaryBytes(bytes.activation, st)});
      } else if (IsInputBackward(op.kind) && st > 0 && s.placement[st - 1] != d) {
        const int32_t dst = s.placement[st - 1];
        outgoing[d].push_back(Message{dst, producer_of(d, i), consumer_of(pos_gradient, st - 1, m, dst), st, m,
                                      false, BoundaryBytes(bytes.gradient, st - 1)});
      }
    }
  }

  // Receives: per channel (src -> dst) in send order, each before the earliest
  // consumer among itself and every later message of the channel.
  std::vector<std::vector<PendingRecv>> incoming(D);
  std::vector<int32_t> order, dsts;
  for (int32_t src = 0; src < D; ++src) {
    const auto& msgs = outgoing[src];
    // Grouped by destination, in send order within each: a source talks to
    // a few neighbours, so one sweep per destination beats a sort.
    dsts.clear();
    for (const Message& msg : msgs) {
      if (std::find(dsts.begin(), dsts.end(), msg.dst) == dsts.end()) dsts.push_back(msg.dst);
    }
    std::sort(dsts.begin(), dsts.end());
    order.resize(msgs.size());
    for (size_t j = 0; j < msgs.size(); ++j) order[j] = static_cast<int32_t>(j);
    if (dsts.size() > 8) {
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return msgs[a].dst < msgs[b].dst; });
    } else if (dsts.size() > 1) {
      order.clear();
      for (const int32_t dst : dsts) {
        for (size_t j = 0; j < msgs.size(); ++j) {
          if (msgs[j].dst == dst) order.push_back(static_cast<int32_t>(j));
        }
      }
    }
    size_t group_end = order.size();
    while (group_end > 0) {
      const int32_t dst = msgs[order[group_end - 1]].dst;
      size_t group_begin = group_end;
      while (group_begin > 0 && msgs[order[group_begin - 1]].dst == dst) --group_begin;
      auto& recvs = incoming[dst];
      const auto merged = static_cast<std::ptrdiff_t>(recvs.size());
      int32_t before = std::numeric_limits<int32_t>::max();
      for (size_t j = group_end; j-- > group_begin;) {
        before = std::min(before, msgs[order[j]].consumer);
        recvs.push_back(PendingRecv{before, src, static_cast<int32_t>(j - group_begin), order[j]});
      }
      // The group is now sorted descending; earlier groups come from smaller
      // sources and are already merged in (before, src, order) order.
      std::reverse(recvs.begin() + merged, recvs.end());
      std::inplace_merge(recvs.begin(), recvs.begin() + merged, recvs.end(), RecvOrder);
      group_end = group_begin;
    }
  }

  for (int32_t d = 0; d < D; ++d) {
    const auto& recvs = incoming[d];
    const auto& program = s.programs[d];
    const auto& sends = outgoing[d];
    std::vector<Op> out;
    // Room for InsertAllReduce's ops too (at most one per stage), so that
    // adding them does not move the program.
    out.reserve(program.size() + recvs.size() + sends.size() + (s.replicas > 1 ? K : 0));
    size_t r = 0, snd = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      for (; r < recvs.size() && recvs[r].before <= i; ++r) {
        out.push_back(RecvOp(outgoing[recvs[r].src][recvs[r].message], recvs[r].src));
      }
      out.push_back(program[i]);
      for (; snd < sends.size() && sends[snd].producer == i; ++snd) out.push_back(SendOp(sends[snd], d));
    }
    for (; r < recvs.size(); ++r) {
      out.push_back(RecvOp(outgoing[recvs[r].src][recvs[r].message], recvs[r].src));
    }
    s.programs[d] = std::move(out);
  }
  Renumber(s);
  return {};
}

void InsertAllReduce(Schedule& s, const std::vector<int64_t>& stage_bytes) {
  if (s.replicas <= 1) return;
  for (auto& program : s.programs) {
    // Last backward-type op of each stage on this device.
    std::vector<int32_t> last(s.num_stages, -1);
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      const Op& op = program[i];
      const bool backward = op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardWeight ||
                            op.kind == OpKind::kBackwardInput;
      if (backward && op.stage >= 0 && op.stage < s.num_stages) last[op.stage] = i;
    }
    // Each after its op and the sends that follow it, in stage order where
    // two meet; inserted from the back, so that the positions hold (they
    // lie near the end: a few ops move).
    std::vector<std::pair<int32_t, int32_t>> after;  // (position, stage)
    for (int32_t st = 0; st < s.num_stages; ++st) {
      if (last[st] < 0) continue;
      int32_t at = last[st];
      while (at + 1 < static_cast<int32_t>(program.size()) && IsSend(program[at + 1].kind)) ++at;
      after.emplace_back(at, st);
    }
    std::sort(after.begin(), after.end(), std::greater<>());
    for (const auto& [at, st] : after) {
      program.insert(program.begin() + at + 1,
                     Op{.kind = OpKind::kAllReduce,
                        .stage = st,
                        .bytes = st < static_cast<int32_t>(stage_bytes.size()) ? stage_bytes[st] : 0});
    }
  }
  Renumber(s);
}

}  // namespace twinpipe::ir
