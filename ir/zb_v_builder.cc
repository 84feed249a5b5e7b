// ZB-V by list scheduling: a unit-time simulation of the V placement whose
// start order becomes each device's program. Any order taken from one valid
// execution is dependency-consistent, so the schedule cannot deadlock.
#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "ir/builders.h"

namespace twinpipe::ir {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

class VListScheduler {
 public:
  VListScheduler(int32_t devices, int32_t micro_batches, int32_t cap)
      : K_(devices), M_(micro_batches), S_(2 * devices), cap_(cap) {}

  // The programs, or nothing when the activation cap stalls every device.
  std::optional<std::vector<std::vector<Op>>> Run() {
    const size_t n = static_cast<size_t>(S_) * M_;
    f_done_.assign(n, kNever);
    i_done_.assign(n, kNever);
    next_.assign(S_, {0, 0, 0});
    in_flight_.assign(K_, 0);
    std::vector<std::vector<Op>> programs(K_);
    struct Running { int64_t end; Op op; };
    std::vector<std::optional<Running>> running(K_);
    int64_t left = 3 * static_cast<int64_t>(n);
    for (int64_t t = 0; left > 0; ++t) {
      for (int32_t d = 0; d < K_; ++d) {
        if (running[d] && running[d]->end == t) {
          Complete(running[d]->op, t);
          running[d].reset();
        }
      }
      bool any_running = false;
      for (int32_t d = 0; d < K_; ++d) {
        if (!running[d]) {
          if (auto op = Choose(d, t)) {
            Start(*op);
            programs[d].push_back(*op);
            running[d] = Running{t + 1, *op};
            --left;
          }
        }
        any_running = any_running || running[d].has_value();
      }
      if (!any_running && left > 0) return std::nullopt;
    }
    return programs;
  }

 private:
  enum { kF, kI, kW };
  size_t Key(int32_t stage, int32_t m) const { return static_cast<size_t>(stage) * M_ + m; }
  int32_t Device(int32_t stage) const { return stage < K_ ? stage : S_ - 1 - stage; }

  std::optional<Op> Choose(int32_t d, int64_t t) const {
    const int32_t stages[2] = {S_ - 1 - d, d};  // the later stage wins ties
    std::optional<Op> best;
    auto better = [&](int32_t m) { return !best || m < best->micro_batch; };
    for (int32_t st : stages) {  // a ready input gradient: on the critical path
      const int32_t m = next_[st][kI];
      if (m < M_ && f_done_[Key(st, m)] <= t && (st == S_ - 1 || i_done_[Key(st + 1, m)] <= t) && better(m)) {
        best = Op{.kind = OpKind::kBackwardInput, .device = d, .stage = st, .micro_batch = m};
      }
    }
    if (best) return best;
    if (in_flight_[d] < cap_) {  // a ready forward, while activations fit
      for (int32_t st : stages) {
        const int32_t m = next_[st][kF];
        if (m < M_ && (st == 0 || f_done_[Key(st - 1, m)] <= t) && better(m)) {
          best = Op{.kind = OpKind::kForward, .device = d, .stage = st, .micro_batch = m};
        }
      }
      if (best) return best;
    }
    int64_t oldest = kNever;  // the longest-deferred weight gradient
    for (int32_t st : stages) {
      const int32_t m = next_[st][kW];
      if (m < M_ && i_done_[Key(st, m)] <= t && i_done_[Key(st, m)] < oldest) {
        oldest = i_done_[Key(st, m)];
        best = Op{.kind = OpKind::kBackwardWeight, .device = d, .stage = st, .micro_batch = m};
      }
    }
    return best;
  }

  void Start(const Op& op) {
    if (op.kind == OpKind::kForward) {
      ++next_[op.stage][kF];
      ++in_flight_[op.device];
    } else {
      ++next_[op.stage][op.kind == OpKind::kBackwardInput ? kI : kW];
    }
  }

  void Complete(const Op& op, int64_t t) {
    if (op.kind == OpKind::kForward) f_done_[Key(op.stage, op.micro_batch)] = t;
    if (op.kind == OpKind::kBackwardInput) i_done_[Key(op.stage, op.micro_batch)] = t;
    if (op.kind == OpKind::kBackwardWeight) --in_flight_[op.device];
  }

  int32_t K_, M_, S_, cap_;
  std::vector<int64_t> f_done_, i_done_;
  std::vector<std::array<int32_t, 3>> next_;
  std::vector<int32_t> in_flight_;
};

// An empty schedule of 2K stages in a V on K devices: stage s on device s
// down, and stage 2K-1-s on device s back up.
Schedule VShape(int32_t devices, int32_t micro_batches) {
  const int32_t K = devices;
  Schedule s;
  s.num_stages = 2 * K;
  s.num_micro_batches = micro_batches;
  s.num_devices = K;
  s.placement.resize(2 * K);
  for (int32_t st = 0; st < 2 * K; ++st) s.placement[st] = st < K ? st : 2 * K - 1 - st;
  s.programs.resize(K);
  return s;
}

// Appends each device's STEP and numbers the ops.
void FinishV(Schedule& s) {
  for (int32_t d = 0; d < s.num_devices; ++d) s.programs[d].push_back(Op{.kind = OpKind::kStep, .device = d});
  Renumber(s);
}

}  // namespace

Schedule BuildZbV(int32_t devices, int32_t micro_batches) {
  const int32_t K = devices;
  Schedule s = VShape(K, micro_batches);
  // 2K chunk activations are 1F1B's K whole stages; a cap that stalls (it
  // cannot for unit times, but the loop is cheap) is raised until it runs.
  for (int32_t cap = 2 * K;; ++cap) {
    if (auto programs = VListScheduler(K, micro_batches, cap).Run()) {
      s.programs = std::move(*programs);
      break;
    }
  }
  FinishV(s);
  return s;
}

Result<Schedule> BuildDualPipeV(int32_t devices, int32_t micro_batches) {
  const int32_t K = devices, M = micro_batches;
  if (M < 2 * K) {
    return Fail(fmt::format("dualpipev needs at least twice as many micro-batches as devices (2 x {} = {}), got {}", K,
                            2 * K, M));
  }
  Schedule s = VShape(K, M);
  for (int32_t d = 0; d < K; ++d) {
    auto& program = s.programs[d];
    const int32_t stage[2] = {d, 2 * K - 1 - d};  // chunk 0 down the V, chunk 1 back up
    int32_t forward[2] = {0, 0}, backward[2] = {0, 0};
    std::deque<Op> weights;  // W's deferred by zero-bubble backwards, oldest first
    bool zero_bubble = false;
    auto F = [&](int c) { program.push_back(Op{.kind = OpKind::kForward, .stage = stage[c], .micro_batch = forward[c]++}); };
    auto B = [&](int c, bool split) {
      const Op op{.kind = split ? OpKind::kBackwardInput : OpKind::kBackward, .stage = stage[c],
                  .micro_batch = backward[c]++};
      program.push_back(op);
      if (split) weights.push_back(Op{.kind = OpKind::kBackwardWeight, .stage = op.stage, .micro_batch = op.micro_batch});
    };
    auto W = [&] {
      program.push_back(weights.front());
      weights.pop_front();
    };
    // DeepSeek's eight phases, rank d of K.
    for (int32_t i = 0; i < (K - d - 1) * 2; ++i) F(0);  // 1: chunk-0 forwards
    for (int32_t i = 0; i < d + 1; ++i) F(0), F(1);       // 2: both chunks
    for (int32_t i = 0; i < K - d - 1; ++i) B(1, true), W(), F(1);  // 3: zero bubble on chunk 1
    // 4: the main phase, F0 with B1 and F1 with B0 overlapped (at the bottom
    // of the V the first F0 and B1 are not: B1 needs that very forward).
    for (int32_t i = 0; i < M - 2 * K + d + 1; ++i) F(0), B(1, false), F(1), B(0, false);
    for (int32_t i = 0; i < K - d - 1; ++i) B(1, false), F(1), B(0, false);  // 5
    for (int32_t i = 0; i < d + 1; ++i) {                 // 6: the second half goes zero bubble
      if (i == (d + 1) / 2 && d % 2 == 1) zero_bubble = true;
      B(1, zero_bubble);
      if (i == (d + 1) / 2 && d % 2 == 0) zero_bubble = true;
      B(0, zero_bubble);
    }
    for (int32_t i = 0; i < K - d - 1; ++i) W(), B(0, true);  // 7
    while (!weights.empty()) W();                            // 8
  }
  FinishV(s);
  return s;
}

}  // namespace twinpipe::ir
