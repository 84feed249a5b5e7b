// The automatic zero-bubble schedule: list scheduling of F, I and W with the
// plan's own op times under a memory limit, in the spirit of Qi et al.'s
// ZB-1p/ZB-2p heuristic (ICLR 2024, section 3.1). Several variants of the
// greedy rule run on the same problem; the one with the shortest overlapped
// step (each stage's span, first op to last) wins, ties going to the shorter
// step.
#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>

#include <fmt/format.h>

#include "ir/builders.h"

namespace twinpipe::ir {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// How a variant of the greedy rule decides.
struct Policy {
  // Warm-up: stage s runs forwards until the first gradient arrives. With
  // `overrun`, one more may start while the gradient is in flight (and
  // delay it); without, the last one must end by its arrival.
  bool overrun = false;
  // A ready F waits for an I due within this fraction of T_F.
  double wait_for_input = 0;
  // A W waits for an F or I due within this fraction of T_W.
  double wait_with_weight = 0;
};

struct Placed {
  OpKind kind;
  int32_t micro_batch;
};

struct Outcome {
  std::vector<std::vector<Placed>> order;  // per stage
  double overlapped = 0, step = 0;
};

class Greedy {
 public:
  Greedy(const AutoProblem& p, const Policy& policy) : p_(p), policy_(policy) {
    const size_t K = p.stages, M = p.micro_batches;
    f_end_.assign(K * M, kNever);
    i_end_.assign(K * M, kNever);
    st_.resize(K);
    WarmUp();
  }

  Result<Outcome> Run() {
    const int32_t K = p_.stages;
    for (int32_t s = 0; s < K; ++s) Refresh(s);
    const int64_t total = 3 * int64_t{K} * p_.micro_batches;
    for (int64_t placed = 0; placed < total; ++placed) {
      int32_t s = -1;
      while (!queue_.empty()) {
        const Entry e = queue_.top();
        queue_.pop();
        if (e.version == st_[e.stage].version) {
          s = e.stage;
          break;
        }
      }
      if (s < 0) return FailRuntime("the automatic scheduler found no op to run (a bug: the problem is feasible)");
      Place(s);
      for (int32_t n : {s - 1, s, s + 1}) {
        if (n >= 0 && n < K) Refresh(n);
      }
    }
    Outcome out;
    for (int32_t s = 0; s < K; ++s) {
      out.overlapped = std::max(out.overlapped, st_[s].last_end - st_[s].first_start);
      out.step = std::max(out.step, st_[s].last_end);
      out.order.push_back(std::move(st_[s].order));
    }
    return out;
  }

 private:
  struct Stage {
    int32_t next_f = 0, next_i = 0;
    std::deque<int32_t> pending_w;  // I done, W not yet
    double free_at = 0, first_start = -1, last_end = 0;
    int32_t warm = 1;               // forwards before the first I
    // The next op and when it starts; `version` invalidates stale queue entries.
    OpKind next_kind = OpKind::kForward;
    double next_start = kNever;
    uint64_t version = 0;
    std::vector<Placed> order;
  };
  struct Entry {
    double time;
    int32_t stage;
    uint64_t version;
    bool operator>(const Entry& o) const { return time != o.time ? time > o.time : stage > o.stage; }
  };

  double& FEnd(int32_t s, int32_t m) { return f_end_[static_cast<size_t>(s) * p_.micro_batches + m]; }
  double& IEnd(int32_t s, int32_t m) { return i_end_[static_cast<size_t>(s) * p_.micro_batches + m]; }
  double Comm(int32_t s) const { return s < static_cast<int32_t>(p_.comm_s.size()) ? p_.comm_s[s] : 0.0; }

  // Activation bytes held, from counts (no drift from adding and subtracting).
  double Used(int32_t s) const {
    const Stage& st = st_[s];
    return (st.next_f - st.next_i) * p_.kept_bytes[s] + static_cast<double>(st.pending_w.size()) * p_.pending_bytes[s];
  }

  // Forwards fit in memory: held plus one more activation at its peak.
  bool FitsForward(int32_t s, int32_t count) const {
    return (count - 1) * p_.kept_bytes[s] + p_.activation_bytes[s] <= p_.limit_bytes[s];
  }

  // The warm-up's forward counts from a prediction of the first gradient's
  // trip: forwards back to back as their inputs allow, the gradient passed
  // on without waiting.
  void WarmUp() {
    const int32_t K = p_.stages, M = p_.micro_batches;
    std::vector<double> prev(M), cur(M);
    std::vector<std::vector<double>> end(K, std::vector<double>(M));
    for (int32_t s = 0; s < K; ++s) {
      double t = 0;
      for (int32_t m = 0; m < M; ++m) {
        const double ready = s == 0 ? 0.0 : end[s - 1][m] + Comm(s - 1);
        t = std::max(t, ready) + p_.forward_s[s];
        end[s][m] = t;
      }
    }
    double gradient = end[K - 1][0] + p_.input_s[K - 1];  // the last stage's first I ends
    st_[K - 1].warm = 1;
    for (int32_t s = K - 2; s >= 0; --s) {
      const double arrives = gradient + Comm(s);
      int32_t n = 1;
      while (n < M && FitsForward(s, n + 1) &&
             (policy_.overrun ? end[s][n - 1] < arrives : end[s][n] <= arrives)) {
        ++n;
      }
      st_[s].warm = n;
      gradient = std::max(arrives, end[s][n - 1]) + p_.input_s[s];
    }
  }

  // When the next I of stage s can start (kNever: not known yet).
  double InputReady(int32_t s) {
    Stage& st = st_[s];
    if (st.next_i >= p_.micro_batches) return kNever;
    const double f = FEnd(s, st.next_i);
    if (f == kNever) return kNever;
    if (s == p_.stages - 1) return f;
    const double g = IEnd(s + 1, st.next_i);
    return g == kNever ? kNever : std::max(f, g + Comm(s));
  }

  // When the next F of stage s can start (kNever: not known, or not allowed).
  double ForwardReady(int32_t s) {
    Stage& st = st_[s];
    if (st.next_f >= p_.micro_batches) return kNever;
    if (st.next_i == 0 && st.next_f >= st.warm) return kNever;
    if (Used(s) + p_.activation_bytes[s] > p_.limit_bytes[s]) return kNever;
    if (s == 0) return 0;
    const double f = FEnd(s - 1, st.next_f);
    return f == kNever ? kNever : f + Comm(s - 1);
  }

  void Refresh(int32_t s) {
    Stage& st = st_[s];
    const double t = st.free_at;
    const double ti = InputReady(s), tf = ForwardReady(s);
    const bool has_w = !st.pending_w.empty();
    // An I restores its activation (a recompute) before it frees it.
    const bool input_fits = Used(s) - p_.kept_bytes[s] + p_.activation_bytes[s] <= p_.limit_bytes[s];
    OpKind kind = OpKind::kForward;
    double start = kNever;
    if (!input_fits && has_w && ti < kNever) {
      kind = OpKind::kBackwardWeight, start = t;  // free memory before the I
    } else if (ti <= t) {
      kind = OpKind::kBackwardInput, start = t;
    } else if (tf <= t) {
      if (ti - t <= policy_.wait_for_input * p_.forward_s[s]) {
        kind = OpKind::kBackwardInput, start = ti;
      } else {
        kind = OpKind::kForward, start = t;
      }
    } else if (has_w) {
      const double next = std::min(ti, tf);
      if (next - t <= policy_.wait_with_weight * p_.weight_s[s]) {
        kind = ti <= tf ? OpKind::kBackwardInput : OpKind::kForward, start = next;
      } else {
        kind = OpKind::kBackwardWeight, start = t;
      }
    } else if (std::min(ti, tf) < kNever) {
      kind = ti <= tf ? OpKind::kBackwardInput : OpKind::kForward, start = std::min(ti, tf);
    }
    st.next_kind = kind;
    st.next_start = start;
    ++st.version;
    if (start < kNever) queue_.push({start, s, st.version});
  }

  void Place(int32_t s) {
    Stage& st = st_[s];
    const double start = st.next_start;
    int32_t m = 0;
    double d = 0;
    switch (st.next_kind) {
      case OpKind::kForward:
        m = st.next_f++;
        d = p_.forward_s[s];
        FEnd(s, m) = start + d;
        break;
      case OpKind::kBackwardInput:
        m = st.next_i++;
        d = p_.input_s[s];
        IEnd(s, m) = start + d;
        st.pending_w.push_back(m);
        break;
      default:
        m = st.pending_w.front();
        st.pending_w.pop_front();
        d = p_.weight_s[s];
        break;
    }
    st.order.push_back({st.next_kind, m});
    if (st.first_start < 0) st.first_start = start;
    st.free_at = st.last_end = start + d;
  }

  const AutoProblem& p_;
  Policy policy_;
  std::vector<double> f_end_, i_end_;
  std::vector<Stage> st_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
};

Result<void> Check(const AutoProblem& p) {
  const size_t K = p.stages;
  if (p.stages < 1 || p.micro_batches < 1) {
    return Fail(fmt::format("the automatic schedule needs stages and micro-batches >= 1, got {} and {}", p.stages,
                            p.micro_batches));
  }
  for (const auto* v : {&p.forward_s, &p.input_s, &p.weight_s, &p.activation_bytes, &p.kept_bytes, &p.pending_bytes,
                        &p.limit_bytes}) {
    if (v->size() != K) return Fail(fmt::format("the automatic schedule's problem needs {} stages' values", K));
  }
  for (size_t s = 0; s < K; ++s) {
    if (!(p.forward_s[s] >= 0 && p.input_s[s] >= 0 && p.weight_s[s] >= 0)) {
      return Fail(fmt::format("stage {}: op times must be finite and >= 0", s));
    }
    if (p.activation_bytes[s] > p.limit_bytes[s]) {
      return Fail(fmt::format("stage {}: one micro-batch's activations take {:.4g} GiB, more than the {:.4g} GiB the "
                              "memory limit leaves it",
                              s, p.activation_bytes[s] / (1 << 30), p.limit_bytes[s] / (1 << 30)));
    }
  }
  return {};
}

}  // namespace

Result<Schedule> BuildAuto(const AutoProblem& p) {
  if (auto ok = Check(p); !ok) return tl::unexpected(ok.error());
  std::optional<Outcome> best;
  for (const bool overrun : {false, true}) {
    for (const double wait_for_input : {0.0, 0.1, 0.25, 0.5, 1.0}) {
      for (const double wait_with_weight : {0.0, 0.25, 0.5, 1.0}) {
        auto out = Greedy(p, Policy{overrun, wait_for_input, wait_with_weight}).Run();
        if (!out) return tl::unexpected(out.error());
        if (!best || std::pair(out->overlapped, out->step) < std::pair(best->overlapped, best->step)) {
          best = std::move(*out);
        }
      }
    }
  }
  Schedule s;
  s.num_stages = s.num_devices = p.stages;
  s.num_micro_batches = p.micro_batches;
  s.placement.resize(p.stages);
  s.programs.resize(p.stages);
  for (int32_t st = 0; st < p.stages; ++st) {
    s.placement[st] = st;
    auto& program = s.programs[st];
    program.reserve(best->order[st].size() + 1);
    for (const Placed& op : best->order[st]) {
      program.push_back(Op{.kind = op.kind, .device = st, .stage = st, .micro_batch = op.micro_batch});
    }
    program.push_back(Op{.kind = OpKind::kStep, .device = st});
  }
  Renumber(s);
  return s;
}

}  // namespace twinpipe::ir
