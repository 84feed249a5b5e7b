// ZB-V by a timed greedy over the V placement (the Zero Bubble authors'
// rules), or by list scheduling should it not complete: either way a
// unit-time execution whose order becomes each device's program. Any order
// taken from one valid execution is dependency-consistent, so the schedule
// cannot deadlock.
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

// ZB-V as the Zero Bubble authors build it (Qi et al., "Pipeline Parallelism
// with Controllable Memory", 2024; the rules read from their scheduler, not
// its code): a timed greedy over the V with unit F, I and W times and free
// transfers, under 2K chunk activations per device (1F1B's peak). Chunk 0
// runs down the devices and chunk 1 back up, for forwards and for input
// gradients alike (a backward's chunk 0 is the model's second half). Warm-up:
// every device starts a chunk-0 forward; from the last device up, each adds
// chunk-0 forwards on itself and the devices above it until its first
// chunk-1 forward is due, then runs that; then the devices below catch up
// on forwards, alternating chunks. Steady state: each round every device
// runs one input gradient (chunk 1 once its predecessor's is placed) and
// one forward, filling any wait for a predecessor with deferred W's and
// running a W early when the wait would exceed the bubble another device
// already has. Each device's bubble is its idle time after its first op;
// the greedy is re-run with those bubbles as allowances while the largest
// falls, over the four choices of early W before I and before F.
class VGreedy {
 public:
  VGreedy(int32_t devices, int32_t micro_batches)
      : K_(devices), M_(micro_batches), cap_(2 * devices) {}

  // The programs with the smallest largest bubble, or nothing when the
  // greedy cannot complete (the caller falls back to list scheduling).
  std::optional<std::vector<std::vector<Op>>> Best() {
    if (M_ >= (1 << 24)) return std::nullopt;  // the packed programs' micro-batch field
    std::optional<Attempt> best;
    for (bool fill_before_i : {true, false}) {
      for (bool fill_before_f : {true, false}) {
        if (best && best->max_bubble == 0) break;  // no device idles: nothing to improve
        auto a = Refine(fill_before_i, fill_before_f, {});
        if (a && (!best || a->max_bubble < best->max_bubble)) best = std::move(a);
      }
    }
    if (!best) return std::nullopt;
    std::vector<std::vector<Op>> programs(K_);
    for (int32_t d = 0; d < K_; ++d) {
      for (uint32_t code : best->programs[d]) {
        const int slot = static_cast<int>(code >> 24);
        const int32_t m = static_cast<int32_t>(code & 0xFFFFFF);
        const Cat cat = static_cast<Cat>(slot / 2);
        const bool down = (cat == kF) == (slot % 2 == 0);  // F0 and I1/W1 run stage d, F1 and I0/W0 stage 2K-1-d
        const OpKind kind = cat == kF ? OpKind::kForward : cat == kI ? OpKind::kBackwardInput : OpKind::kBackwardWeight;
        programs[d].push_back(Op{.kind = kind, .device = d, .stage = down ? d : 2 * K_ - 1 - d, .micro_batch = m});
      }
    }
    return programs;
  }

 private:
  // Kinds in the order of a micro-batch's life on the V: F0 F1 I0 I1 W0 W1.
  enum Cat { kF = 0, kI = 1, kW = 2 };
  static int Slot(Cat cat, int chunk) { return 2 * cat + chunk; }
  struct Attempt {
    std::vector<std::vector<uint32_t>> programs;  // per device: slot << 24 | micro-batch
    std::vector<int64_t> bubble;
    int64_t max_bubble = 0;
  };

  // Re-runs with the bubbles found as allowances while the largest falls.
  std::optional<Attempt> Refine(bool fill_i, bool fill_f, std::vector<int64_t> allowed) {
    auto a = Try(fill_i, fill_f, allowed);
    if (!a) return a;
    const int64_t most_allowed = allowed.empty() ? -1 : *std::max_element(allowed.begin(), allowed.end());
    if (a->max_bubble > 0 && (most_allowed < 0 || a->max_bubble < most_allowed)) {
      auto again = Refine(fill_i, fill_f, a->bubble);
      if (again && again->max_bubble < a->max_bubble) return again;
    }
    return a;
  }

  std::optional<Attempt> Try(bool fill_i, bool fill_f, const std::vector<int64_t>& allowed) {
    const int32_t K = K_, M = M_;
    std::vector<std::array<int32_t, 6>> count(K, std::array<int32_t, 6>{});
    std::vector<int64_t> end(static_cast<size_t>(6) * K * M, -1);  // [(device 6 + slot) M + micro-batch]
    std::vector<int64_t> cur(K, 0), mem(K, 0), bubble(K, 0);
    std::vector<std::deque<std::pair<int, int32_t>>> pending(K);  // (chunk, micro-batch) of deferred W's
    std::vector<std::vector<uint32_t>> programs(K);
    const int64_t most_allowed = allowed.empty() ? -1 : *std::max_element(allowed.begin(), allowed.end());
    auto At = [&](int slot, int32_t d, int32_t m) -> int64_t& { return end[(static_cast<size_t>(d) * 6 + slot) * M + m]; };
    auto End = [&](Cat cat, int chunk, int32_t d, int32_t m) -> int64_t& { return At(Slot(cat, chunk), d, m); };
    for (auto& p : programs) p.reserve(static_cast<size_t>(6) * M + 1);
    // The bubble a device may still take before it exceeds the worst so far.
    int64_t worst = 0;  // the largest bubble so far (bubbles only grow)
    auto Slack = [&](int32_t d) {
      return (allowed.empty() ? worst : std::max(worst, most_allowed - allowed[d])) - bubble[d];
    };
    auto Put = [&](Cat cat, int chunk, int32_t d) {
      const int32_t m = count[d][Slot(cat, chunk)];
      const int64_t delta = cat == kF ? 1 : cat == kW ? -1 : 0;
      if (m >= M || mem[d] + delta > cap_) return false;
      if (cat == kW ? End(kI, chunk, d, m) < 0 : Slot(cat, chunk) > 0 && At(Slot(cat, chunk) - 1, d, m) < 0) {
        return false;
      }
      int64_t t = cur[d] + 1;
      const int64_t unhindered = t;
      if (cat != kW) {  // chunk 0 waits for the device above, chunk 1 for the one below
        const int32_t from = chunk == 0 ? d - 1 : d + 1;
        if (from >= 0 && from < K) {
          const int64_t ready = End(cat, chunk, from, m);
          if (ready < 0) return false;
          t = std::max(t, ready + 1);
        }
      }
      if (count[d][Slot(kF, 0)] > 0) {
        bubble[d] += t - unhindered;
        worst = std::max(worst, bubble[d]);
      }
      End(cat, chunk, d, m) = t;
      cur[d] = t;
      mem[d] += delta;
      programs[d].push_back(static_cast<uint32_t>(Slot(cat, chunk)) << 24 | static_cast<uint32_t>(m));
      if (cat == kI) pending[d].emplace_back(chunk, m);
      ++count[d][Slot(cat, chunk)];
      return true;
    };
    auto PutW = [&](int32_t d) {
      if (pending[d].empty()) return false;
      const int chunk = pending[d].front().first;
      pending[d].pop_front();
      return Put(kW, chunk, d);
    };
    // Before an op whose predecessor ends at `ready` (-1: none): deferred W's
    // into the wait, and one more when the wait would exceed the slack.
    auto Fill = [&](int32_t d, int64_t ready, bool early) {
      if (ready < 0) return true;
      while (!pending[d].empty() && ready >= cur[d] + 1) {
        if (!PutW(d)) return false;
      }
      if (!pending[d].empty() && ready - cur[d] > Slack(d) && early) return PutW(d);
      return true;
    };
    auto Ready = [&](Cat cat, int chunk, int32_t d) -> int64_t {
      const int32_t from = chunk == 0 ? d - 1 : d + 1;
      if (from < 0 || from >= K) return -1;
      const int32_t m = count[d][Slot(cat, chunk)];
      return m < M ? End(cat, chunk, from, m) : -1;
    };

    // Warm-up.
    for (int32_t d = 0; d < K; ++d) {
      if (!Put(kF, 0, d)) return std::nullopt;
    }
    for (int32_t i = K - 1; i >= 0; --i) {
      if (i < K - 1) {
        const int64_t due = End(kF, 1, i + 1, 0);
        while (mem[i] + 2 + 2 * i <= cap_ && cur[i] + 1 <= due && count[i][Slot(kF, 0)] < M) {
          for (int32_t j = 0; j <= i; ++j) {
            if (!Put(kF, 0, j)) return std::nullopt;
          }
        }
      }
      if (!Put(kF, 1, i)) return std::nullopt;
    }
    int chunk = 0;
    for (int32_t i = 1; i < K; ++i) {
      auto behind = [&] {
        const auto &a = count[i], &b = count[i - 1];
        return a[0] + a[1] < b[0] + b[1] || (a[1] <= b[1] && b[1] < M);
      };
      for (int idle = 0; behind(); chunk ^= 1) {
        bool placed = false;
        for (int32_t j = K - 1; j >= i; --j) {
          if (count[j][Slot(kF, chunk)] < M) {
            if (!Put(kF, chunk, j)) return std::nullopt;
            placed = true;
          }
        }
        idle = placed ? 0 : idle + 1;
        if (idle > 1) return std::nullopt;
      }
    }
    // Steady state: one I and one F per device a round.
    for (int32_t round = 0; round < 2 * M; ++round) {
      std::vector<std::pair<int32_t, int>> order, ups;
      for (int32_t i = 0; i < K; ++i) {
        const auto& c = count[i];
        bool up = false;
        if (c[Slot(kI, 1)] < c[Slot(kI, 0)]) {
          up = i == K - 1 || c[Slot(kI, 0)] >= M || End(kI, 1, i + 1, c[Slot(kI, 1)]) >= 0;
        }
        (up ? ups : order).emplace_back(i, up ? 1 : 0);
      }
      order.insert(order.begin(), ups.rbegin(), ups.rend());  // chunk 1 from the bottom up, then chunk 0 down
      for (auto [i, c] : order) {
        if (!Fill(i, Ready(kI, c, i), c == 1 || fill_i) || !Put(kI, c, i)) return std::nullopt;
      }
      for (int32_t i = 0; i < K; ++i) {
        const auto& c = count[i];
        if (c[Slot(kF, 1)] >= M) continue;
        int item = -1;
        if (c[Slot(kF, 1)] >= c[Slot(kF, 0)]) {
          item = 0;
        } else if (i == K - 1 || End(kF, 1, i + 1, c[Slot(kF, 1)]) >= 0) {
          item = 1;
        } else if (c[Slot(kF, 0)] < M && (i == 0 || End(kF, 0, i - 1, c[Slot(kF, 0)]) >= 0)) {
          item = 0;
        }
        if (item < 0) continue;
        while (mem[i] + 1 > cap_) {
          if (!PutW(i)) return std::nullopt;
        }
        if (!Fill(i, Ready(kF, item, i), fill_f) || !Put(kF, item, i)) return std::nullopt;
      }
    }
    for (int32_t d = 0; d < K; ++d) {
      while (!pending[d].empty()) {
        if (!PutW(d)) return std::nullopt;
      }
      if (programs[d].size() != static_cast<size_t>(6) * M) return std::nullopt;
    }
    return Attempt{.programs = std::move(programs), .bubble = std::move(bubble), .max_bubble = worst};
  }

  int32_t K_, M_, cap_;
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
  // The authors' greedy where it completes; list scheduling otherwise.
  if (auto programs = VGreedy(K, micro_batches).Best()) {
    s.programs = std::move(*programs);
    FinishV(s);
    return s;
  }
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

Result<void> CheckDualPipeV(int32_t K, int32_t M) {
  if (M < 2 * K) {
    return Fail(fmt::format("dualpipev needs at least twice as many micro-batches as devices (2 x {} = {}), got {}", K,
                            2 * K, M));
  }
  return {};
}

Result<Schedule> BuildDualPipeV(int32_t devices, int32_t micro_batches) {
  const int32_t K = devices, M = micro_batches;
  if (auto ok = CheckDualPipeV(K, M); !ok) return tl::unexpected(ok.error());
  Schedule s = VShape(K, M);
  for (int32_t d = 0; d < K; ++d) {
    auto& program = s.programs[d];
    const int32_t stage[2] = {d, 2 * K - 1 - d};  // chunk 0 down the V, chunk 1 back up
    int32_t forward[2] = {0, 0}, backward[2] = {0, 0};
    std::deque<Op> weights;  // W's deferred by zero-bubble backwards, oldest first
    bool zero_bubble = false;
    auto F = [&](int c, bool paired = false) {
      program.push_back(Op{.kind = OpKind::kForward, .stage = stage[c], .micro_batch = forward[c]++, .paired = paired});
    };
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
    // Each F is paired with the B written after it: they run overlapped.
    for (int32_t i = 0; i < M - 2 * K + d + 1; ++i) {
      F(0, !(i == 0 && d == K - 1)), B(1, false), F(1, true), B(0, false);
    }
    for (int32_t i = 0; i < K - d - 1; ++i) B(1, false), F(1, true), B(0, false);  // 5
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
