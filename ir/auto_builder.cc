// The automatic zero-bubble schedule: list scheduling of F, I and W with the
// plan's own op times under a memory limit, in the spirit of Qi et al.'s
// ZB-1p/ZB-2p heuristic (ICLR 2024, section 3.1). Several variants of the
// greedy rule run on the same problem; the one with the shortest overlapped
// step (each stage's span, first op to last) wins, ties going to the shorter
// step.
#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <span>

#include <fmt/format.h>

#include "ir/builders.h"

namespace twinpipe::ir {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// How a variant of the greedy rule decides.
struct Policy {
  // Warm-up: stage s runs forwards until its first gradient arrives, as
  // predicted from the times (with `overrun`, one more may start while the
  // gradient is in flight); without `predict`, only memory bounds it.
  bool predict = true;
  bool overrun = false;
  // A ready F waits for an I due within this fraction of T_F.
  double wait_for_input = 0;
  // A W waits for an F or I due within this fraction of T_W.
  double wait_with_weight = 0;
};

struct Placed {
  OpKind kind;
  int32_t stage, micro_batch;
};

struct Outcome {
  std::vector<std::vector<Placed>> order;  // per device
  double overlapped = 0, step = 0;
};

class Greedy {
 public:
  // `horizon`: the micro-batches whose ops' ends are kept (a run of its
  // first n ops reaches no further than micro-batch n).
  Greedy(const AutoProblem& p, const Policy& policy, int32_t horizon)
      : p_(p), policy_(policy), stride_(std::min(horizon, p.micro_batches)) {
    const size_t S = p.stages;
    f_end_.assign(S * stride_, kNever);
    i_end_.assign(S * stride_, kNever);
    st_.resize(S);
    int32_t D = 0;
    for (int32_t s = 0; s < p.stages; ++s) D = std::max(D, Device(s) + 1);
    dv_.resize(D);
    for (int32_t s = 0; s < p.stages; ++s) dv_[Device(s)].stages.push_back(s);
    for (auto& d : dv_) std::reverse(d.stages.begin(), d.stages.end());  // later stages win ties
    peak_.assign(D, 0.0);
    first_ = Tournament(D);
    if (!p.boundary_bytes.empty()) reserved_.assign(D, 0.0);
    if (policy.predict) WarmUp();
  }

  // The outcome, or nothing once a device's span exceeds `give_up` (a
  // variant already found is better).
  Result<std::optional<Outcome>> Run(double give_up) {
    Start();
    for (int64_t placed = 0; placed < Total(); ++placed) {
      auto d = PlaceNext();
      if (!d) return tl::unexpected(d.error());
      // Its remaining ops run after this one: the span can only end later.
      if (dv_[*d].last_end - dv_[*d].first_start + Remaining(*d) > give_up * (1 + 1e-9)) return std::optional<Outcome>();
    }
    Outcome out;
    for (auto& dev : dv_) {
      out.overlapped = std::max(out.overlapped, dev.last_end - dev.first_start);
      out.step = std::max(out.step, dev.last_end);
      out.order.push_back(std::move(dev.order));
    }
    return std::optional<Outcome>(std::move(out));
  }

  // The most any device holds (base[d] plus its activations, the running
  // op's included) over the first `ops` ops placed, stopping once that
  // reaches `enough`; nothing when the variant fails before.
  std::optional<double> PrefixPeak(int64_t ops, std::span<const double> base, double enough) {
    Start();
    double most = 0;
    for (int64_t placed = 0; placed < std::min(ops, Total()) && most < enough; ++placed) {
      auto d = PlaceNext();
      if (!d) return std::nullopt;
      most = std::max(most, base[*d] + peak_[*d]);
    }
    return most;
  }

 private:
  int64_t Total() const { return 3 * int64_t{p_.stages} * p_.micro_batches; }

  void Start() {
    for (int32_t d = 0; d < static_cast<int32_t>(dv_.size()); ++d) Refresh(d);
  }

  // Places the op that starts first (the lower device on a tie) and
  // refreshes what it changes; returns its device.
  Result<int32_t> PlaceNext() {
    const int32_t d = first_.Min();
    if (dv_[d].next_start == kNever) return FailRuntime("the automatic scheduler found no op to run (a bug: the problem is feasible)");
    const int32_t s = dv_[d].next_stage;
    const OpKind kind = dv_[d].next_kind;
    const int32_t window = st_[s].window;
    Place(d);
    const bool widened = st_[s].window > window;
    Refresh(d);
    // What else the op changes: an F the next stage's forward input, an I
    // the previous stage's gradient; a W only its own device's memory.
    const int32_t n = kind == OpKind::kForward ? s + 1 : kind == OpKind::kBackwardInput ? s - 1 : -1;
    if (n >= 0 && n < p_.stages && Device(n) != d) Refresh(Device(n));
    // With buffers, what this device holds (and, after a window grew,
    // what the next one reserves) decides whether the devices that send
    // them inputs may run forwards.
    if (!p_.boundary_bytes.empty()) {
      RefreshSendersOf(d);
      if (widened && Buffered(s)) RefreshSendersOf(Device(s + 1));
    }
    return d;
  }

  struct Stage {
    int32_t next_f = 0, next_i = 0;
    // I done, W not yet: micro-batches next_w .. next_i - 1 (a stage's Is
    // and Ws both run in micro-batch order).
    int32_t next_w = 0;
    int32_t PendingW() const { return next_i - next_w; }
    int32_t warm = std::numeric_limits<int32_t>::max();  // forwards before the first I
    int32_t window = 0;  // the most micro-batches in flight so far
  };
  struct Dev {
    std::vector<int32_t> stages;  // the stages it holds, latest first
    double free_at = 0, first_start = -1, last_end = 0;
    // The next op and when it starts (kNever: none known yet).
    OpKind next_kind = OpKind::kForward;
    int32_t next_stage = 0;
    double next_start = kNever;
    std::vector<Placed> order;
  };

  int32_t Device(int32_t s) const { return p_.placement.empty() ? s : p_.placement[s]; }
  // Whether a transfer across stage s's boundary leaves a buffer on its
  // receiver (the problem has boundaries, and s + 1 is on another device).
  bool Buffered(int32_t s) const {
    return !p_.boundary_bytes.empty() && s + 1 < p_.stages && Device(s) != Device(s + 1) && p_.boundary_bytes[s] > 0;
  }
  double& FEnd(int32_t s, int32_t m) { return f_end_[static_cast<size_t>(s) * stride_ + m]; }
  double& IEnd(int32_t s, int32_t m) { return i_end_[static_cast<size_t>(s) * stride_ + m]; }
  // A transfer from stage s to s + 1: none inside a device.
  double Comm(int32_t s) const {
    if (s + 1 < p_.stages && Device(s) == Device(s + 1)) return 0.0;
    return s < static_cast<int32_t>(p_.comm_s.size()) ? p_.comm_s[s] : 0.0;
  }

  // The buffers a micro-batch of stage s would hold on its device beyond
  // what Reserved keeps: its input and its gradient, where they come from
  // another device and no micro-batch has been in flight to reserve them.
  double Unreserved(int32_t s) const {
    if (p_.boundary_bytes.empty()) return 0.0;
    return (s > 0 && Buffered(s - 1) && st_[s - 1].window == 0 ? p_.boundary_bytes[s - 1] : 0.0) +
           (Buffered(s) && st_[s].window == 0 ? p_.boundary_bytes[s] : 0.0);
  }

  // Activation bytes a device holds, from counts (no drift from adding and subtracting).
  double Activations(int32_t d) const {
    double used = 0;
    for (int32_t s : dv_[d].stages) {
      const Stage& st = st_[s];
      used += (st.next_f - st.next_i) * p_.kept_bytes[s] + st.PendingW() * p_.pending_bytes[s];
    }
    return used;
  }

  // Room a device keeps for the buffers other devices may send it, whatever
  // the timing: a stage's inputs waiting for their forward are at most the
  // micro-batches the previous stage ever has in flight (an input arrives
  // after that stage's F and is used before its I), its gradients waiting
  // for their I at most its own.
  double Reserved(int32_t d) const { return reserved_.empty() ? 0.0 : reserved_[d]; }

  // Stage s's window grows (by = 1) or shrinks back (by = -1), with the
  // room it reserves for its gradients here and its outputs on the next
  // device.
  void Widen(int32_t s, int32_t by) {
    st_[s].window += by;
    if (Buffered(s)) {
      for (const int32_t d : {Device(s), Device(s + 1)}) {
        double room = 0;  // from counts: no drift from adding and subtracting
        for (int32_t t : dv_[d].stages) {
          if (t > 0 && Buffered(t - 1)) room += st_[t - 1].window * p_.boundary_bytes[t - 1];
          if (Buffered(t)) room += st_[t].window * p_.boundary_bytes[t];
        }
        reserved_[d] = room;
      }
    }
  }

  double Used(int32_t d) const { return Activations(d) + Reserved(d); }

  // Seconds of the ops device d has still to run, from counts.
  double Remaining(int32_t d) const {
    const double M = p_.micro_batches;
    double left = 0;
    for (int32_t s : dv_[d].stages) {
      const Stage& st = st_[s];
      left += (M - st.next_f) * p_.forward_s[s] + (M - st.next_i) * p_.input_s[s] + (M - st.next_w) * p_.weight_s[s];
    }
    return left;
  }

  // The warm-up's forward counts from a prediction of the first gradient's
  // trip: each stage's forwards back to back as their inputs allow, the
  // gradient passed on without waiting.
  void WarmUp() {
    const int32_t S = p_.stages, M = p_.micro_batches;
    // end[s][m]: when stage s's forward of micro-batch m ends. Columns are
    // taken as the counts need them: a warm-up runs a few forwards per
    // stage, not M.
    std::vector<std::vector<double>> end(S);
    int32_t columns = 0;
    auto need = [&](int32_t m) {  // columns 0..m
      if (m < columns) return;
      const int32_t upto = std::min(M, std::max(m + 1, 2 * columns));
      for (int32_t s = 0; s < S; ++s) {
        end[s].resize(upto);
        for (int32_t c = columns; c < upto; ++c) {
          const double ready = s == 0 ? 0.0 : end[s - 1][c] + Comm(s - 1);
          end[s][c] = std::max(c > 0 ? end[s][c - 1] : 0.0, ready) + p_.forward_s[s];
        }
      }
      columns = upto;
    };
    need(std::min(M, 2 * S + 2) - 1);
    double gradient = end[S - 1][0] + p_.input_s[S - 1];  // the last stage's first I ends
    st_[S - 1].warm = 1;
    for (int32_t s = S - 2; s >= 0; --s) {
      const double arrives = gradient + Comm(s);
      const double limit = p_.limit_bytes[Device(s)];
      int32_t n = 1;
      auto more = [&] {
        const int32_t read = policy_.overrun ? n - 1 : n;
        need(read);
        return policy_.overrun ? end[s][read] < arrives : end[s][read] <= arrives;
      };
      while (n < M && n * p_.kept_bytes[s] + p_.activation_bytes[s] <= limit && more()) ++n;
      st_[s].warm = n;
      need(n - 1);
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

  // Only a sender whose next forward would widen its window asks about d.
  void RefreshSendersOf(int32_t d) {
    for (int32_t to : dv_[d].stages) {
      const Stage& from = to > 0 ? st_[to - 1] : st_[0];
      if (to > 0 && Buffered(to - 1) && from.next_f - from.next_i + 1 > from.window) Refresh(Device(to - 1));
    }
  }

  // Whether `bytes` exceed device d's limit, beyond rounding (a limit made
  // of the very sums checked against it fits).
  bool Over(double bytes, int32_t d) const { return bytes > p_.limit_bytes[d] * (1 + 1e-12); }

  // Room device d keeps for one micro-batch of each stage after s on it
  // that still has forwards to run: they lead to the gradients s awaits.
  // With s = -1, of each of its stages: room buffers must never take, as
  // it stays taken once the stages have nothing in flight.
  double LaterRoom(int32_t d, int32_t s) const {
    double room = 0;
    for (int32_t later : dv_[d].stages) {
      if (later > s && st_[later].next_f < p_.micro_batches) room += p_.activation_bytes[later] + Unreserved(later);
    }
    return room;
  }

  // Room device d keeps, when stage s runs a forward, for the largest
  // activation another stage's I must restore (a recompute) before it frees
  // it: each stage with micro-batches in flight, but an earlier one whose
  // oldest micro-batch still waits for this very forward (its gradient
  // comes back through s: holding room for it here would deadlock).
  double RestoreRoom(int32_t d, int32_t s) const {
    double room = 0;
    for (int32_t u : dv_[d].stages) {
      const Stage& st = st_[u];
      if (u == s || st.next_f == st.next_i) continue;
      if (u < s && st_[s].next_f <= st.next_i) continue;
      room = std::max(room, p_.activation_bytes[u] - p_.kept_bytes[u]);
    }
    return room;
  }

  // When the next F of stage s can start (kNever: not known, or not allowed).
  double ForwardReady(int32_t s, double used) {
    Stage& st = st_[s];
    if (st.next_f >= p_.micro_batches) return kNever;
    if (st.next_i == 0 && st.next_f >= st.warm) return kNever;
    const int32_t d = Device(s);
    // With a buffered boundary, more micro-batches in flight than ever
    // reserve one more gradient here and one more input on the next device
    // for good. Judged as if reserved: neither device may exceed the most
    // it has held, the next must keep room to run a forward now, and both
    // room to run one of each of their stages once nothing is in flight.
    const bool grows = Buffered(s) && st.next_f - st.next_i + 1 > st.window;
    if (grows) Widen(s, 1);
    bool fits = !Over((grows ? Used(d) : used) + LaterRoom(d, s) +
                          std::max(p_.activation_bytes[s], p_.kept_bytes[s] + RestoreRoom(d, s)),
                      d);
    if (grows && fits) {
      const int32_t r = Device(s + 1);
      fits = !Over(peak_[r] + Reserved(r), r) && !Over(Reserved(r) + LaterRoom(r, -1), r) &&
             !Over(Used(r) + LaterRoom(r, s), r) && !Over(peak_[d] + Reserved(d), d) &&
             !Over(Reserved(d) + LaterRoom(d, -1), d);
    }
    if (grows) Widen(s, -1);
    if (!fits) return kNever;
    if (s == 0) return 0;
    const double f = FEnd(s - 1, st.next_f);
    return f == kNever ? kNever : f + Comm(s - 1);
  }

  void Refresh(int32_t d) {
    Dev& dev = dv_[d];
    const double t = dev.free_at, used = Used(d);
    // Per kind, the stage whose op comes first: the earliest ready (an I,
    // ties to the lower micro-batch), and the later stage on a tie.
    int32_t si = -1, sf = -1, sw = -1, blocked = -1;
    double ti = kNever, tf = kNever;
    for (int32_t s : dev.stages) {
      const double a = InputReady(s);
      if (a < kNever && (si < 0 || std::max(a, t) < std::max(ti, t) ||
                         (std::max(a, t) == std::max(ti, t) && st_[s].next_i < st_[si].next_i))) {
        si = s, ti = a;
      }
      // An I restores its activation (a recompute) before it frees it.
      if (a < kNever && Over(used - p_.kept_bytes[s] + p_.activation_bytes[s], d)) blocked = s;
      const double b = ForwardReady(s, used);
      if (b < kNever && (sf < 0 || std::max(b, t) < std::max(tf, t) ||
                         (std::max(b, t) == std::max(tf, t) && st_[s].next_f < st_[sf].next_f))) {
        sf = s, tf = b;
      }
      if (st_[s].PendingW() > 0 && sw < 0) sw = s;
    }
    OpKind kind = OpKind::kForward;
    int32_t stage = -1;
    double start = kNever;
    if (blocked >= 0 && sw >= 0) {
      kind = OpKind::kBackwardWeight, stage = sw, start = t;  // free memory before the I
    } else if (ti <= t) {
      kind = OpKind::kBackwardInput, stage = si, start = t;
    } else if (tf <= t) {
      if (ti - t <= policy_.wait_for_input * p_.forward_s[sf]) {
        kind = OpKind::kBackwardInput, stage = si, start = ti;
      } else {
        kind = OpKind::kForward, stage = sf, start = t;
      }
    } else if (sw >= 0) {
      const double next = std::min(ti, tf);
      if (next - t <= policy_.wait_with_weight * p_.weight_s[sw]) {
        if (ti <= tf) {
          kind = OpKind::kBackwardInput, stage = si;
        } else {
          kind = OpKind::kForward, stage = sf;
        }
        start = next;
      } else {
        kind = OpKind::kBackwardWeight, stage = sw, start = t;
      }
    } else if (std::min(ti, tf) < kNever) {
      if (ti <= tf) {
        kind = OpKind::kBackwardInput, stage = si, start = ti;
      } else {
        kind = OpKind::kForward, stage = sf, start = tf;
      }
    }
    dev.next_kind = kind;
    dev.next_stage = stage;
    dev.next_start = start;
    first_.Set(d, start);
  }

  void Place(int32_t d) {
    Dev& dev = dv_[d];
    const int32_t s = dev.next_stage;
    Stage& st = st_[s];
    const double start = dev.next_start;
    int32_t m = 0;
    double duration = 0;
    // What the device holds while the op runs: a forward's whole
    // activation, an I's restored one (a recompute) before it frees it.
    const double held = dev.next_kind == OpKind::kForward       ? p_.activation_bytes[s]
                        : dev.next_kind == OpKind::kBackwardInput ? p_.activation_bytes[s] - p_.kept_bytes[s]
                                                                  : 0.0;
    peak_[d] = std::max(peak_[d], Activations(d) + held);
    switch (dev.next_kind) {
      case OpKind::kForward:
        m = st.next_f++;
        if (st.next_f - st.next_i > st.window) Widen(s, 1);
        duration = p_.forward_s[s];
        FEnd(s, m) = start + duration;
        break;
      case OpKind::kBackwardInput:
        m = st.next_i++;
        duration = p_.input_s[s];
        IEnd(s, m) = start + duration;
        break;
      default:
        m = st.next_w++;
        duration = p_.weight_s[s];
        break;
    }
    peak_[d] = std::max(peak_[d], Activations(d));
    dev.order.push_back({dev.next_kind, s, m});
    if (dev.first_start < 0) dev.first_start = start;
    dev.free_at = dev.last_end = start + duration;
  }

  // A tournament over the devices' next start times: the earliest (the
  // lower device on a tie) at the root, a change in log2(devices) steps.
  class Tournament {
   public:
    Tournament() = default;
    explicit Tournament(int32_t n) {
      while (leaves_ < n) leaves_ *= 2;
      time_.assign(2 * leaves_, kNever);
      who_.assign(2 * leaves_, 0);
      for (int32_t k = 0; k < leaves_; ++k) who_[leaves_ + k] = k;
      for (int32_t i = leaves_ - 1; i >= 1; --i) Pull(i);
    }
    void Set(int32_t k, double time) {
      int32_t i = leaves_ + k;
      if (time_[i] == time) return;
      time_[i] = time;
      for (i /= 2; i >= 1; i /= 2) Pull(i);
    }
    int32_t Min() const { return who_[1]; }

   private:
    void Pull(int32_t i) {
      const int32_t l = 2 * i, r = l + 1;
      const int32_t w = time_[r] < time_[l] ? r : l;  // the left (lower device) on a tie
      time_[i] = time_[w], who_[i] = who_[w];
    }
    int32_t leaves_ = 1;
    std::vector<double> time_;
    std::vector<int32_t> who_;
  };

  const AutoProblem& p_;
  Policy policy_;
  int32_t stride_;  // micro-batches per stage in f_end_ and i_end_
  Tournament first_;
  std::vector<double> f_end_, i_end_;
  std::vector<Stage> st_;
  std::vector<Dev> dv_;
  std::vector<double> peak_;      // per device, the most activation bytes held so far
  std::vector<double> reserved_;  // per device, the room its stages' windows reserve (with boundaries)
};

// The variants of the rule, those most often best first (so that the
// others give up early).
std::vector<Policy> Variants() {
  std::vector<Policy> variants;
  for (const bool overrun : {false, true}) {
    for (const double wait_with_weight : {0.0, 0.5}) {
      for (const double wait_for_input : {0.1, 0.25}) variants.push_back({true, overrun, wait_for_input, wait_with_weight});
    }
  }
  variants.push_back({false, false, 0.1, 0.0});  // memory alone bounds the warm-up
  return variants;
}

Result<void> Check(const AutoProblem& p) {
  const size_t S = p.stages;
  if (p.stages < 1 || p.micro_batches < 1) {
    return Fail(fmt::format("the automatic schedule needs stages and micro-batches >= 1, got {} and {}", p.stages,
                            p.micro_batches));
  }
  for (const auto* v : {&p.forward_s, &p.input_s, &p.weight_s, &p.activation_bytes, &p.kept_bytes, &p.pending_bytes}) {
    if (v->size() != S) return Fail(fmt::format("the automatic schedule's problem needs {} stages' values", S));
  }
  if (!p.placement.empty() && p.placement.size() != S) {
    return Fail(fmt::format("the automatic schedule's placement needs {} stages' devices", S));
  }
  int32_t D = p.placement.empty() ? p.stages : 0;
  for (int32_t d : p.placement) {
    if (d < 0 || d >= p.stages) return Fail(fmt::format("placement: device {} is out of range", d));
    D = std::max(D, d + 1);
  }
  std::vector<char> used(D, p.placement.empty());
  for (int32_t d : p.placement) used[d] = 1;
  if (std::find(used.begin(), used.end(), 0) != used.end()) return Fail("placement: a device holds no stage");
  if (p.limit_bytes.size() != static_cast<size_t>(D)) {
    return Fail(fmt::format("the automatic schedule's problem needs {} devices' limits", D));
  }
  for (size_t s = 0; s < S; ++s) {
    if (!(p.forward_s[s] >= 0 && p.input_s[s] >= 0 && p.weight_s[s] >= 0)) {
      return Fail(fmt::format("stage {}: op times must be finite and >= 0", s));
    }
    // With its received input and gradient, where they cross devices.
    auto device = [&](size_t st) { return p.placement.empty() ? static_cast<int32_t>(st) : p.placement[st]; };
    const int32_t d = device(s);
    auto crosses = [&](size_t st) {
      return !p.boundary_bytes.empty() && st + 1 < S && device(st) != device(st + 1) ? p.boundary_bytes[st] : 0.0;
    };
    const double buffers = (s > 0 ? crosses(s - 1) : 0.0) + crosses(s), one = p.activation_bytes[s] + buffers;
    if (p.limit_bytes[d] < 0) {
      return Fail(fmt::format("stage {}: its device's weights, gradients and optimizer state alone take {:.4g} GiB "
                              "more than the memory limit, before any activation (raise --memory-cap or "
                              "/pipeline/memory_cap)",
                              s, -p.limit_bytes[d] / (1 << 30)));
    }
    if (one > p.limit_bytes[d] * (1 + 1e-12)) {  // beyond rounding, as Greedy::Over
      return Fail(fmt::format("stage {}: one micro-batch's activations {}take {:.4g} GiB, more than the {:.4g} GiB the "
                              "memory limit leaves it",
                              s, buffers > 0 ? "and received buffers " : "", one / (1 << 30),
                              p.limit_bytes[d] / (1 << 30)));
    }
  }
  return {};
}

}  // namespace

AutoProblem RandomAutoProblem(int32_t stages, int32_t micro_batches, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.2, 2.0);
  AutoProblem p;
  p.stages = stages, p.micro_batches = micro_batches;
  for (int32_t st = 0; st < stages; ++st) {
    p.forward_s.push_back(u(rng)), p.input_s.push_back(u(rng)), p.weight_s.push_back(u(rng));
    p.comm_s.push_back(u(rng) / 4);
    p.activation_bytes.push_back(1), p.kept_bytes.push_back(1), p.pending_bytes.push_back(u(rng) / 2);
    p.limit_bytes.push_back(1 + static_cast<double>(rng() % (2 * stages)));
  }
  return p;
}

double AutoLeastPeak(const AutoProblem& p, std::span<const double> base, int64_t ops, double enough) {
  if (!Check(p)) return kNever;  // BuildAuto fails: no schedule at all
  double least = kNever;
  const auto horizon = static_cast<int32_t>(std::min<int64_t>(p.micro_batches, ops + 1));
  for (const Policy& policy : Variants()) {
    // A variant that fails cannot be the one chosen.
    if (auto most = Greedy(p, policy, horizon).PrefixPeak(ops, base, enough)) least = std::min(least, *most);
  }
  return least;
}

Result<Schedule> BuildAuto(const AutoProblem& p) {
  if (auto ok = Check(p); !ok) return tl::unexpected(ok.error());
  std::optional<Outcome> best;
  std::optional<Error> failure;
  // No device can be busy for less than its own work: a variant within
  // 0.1% of that ends the search.
  std::vector<double> work;
  for (int32_t st = 0; st < p.stages; ++st) {
    const size_t d = p.placement.empty() ? st : p.placement[st];
    if (work.size() <= d) work.resize(d + 1, 0.0);
    work[d] += p.micro_batches * (p.forward_s[st] + p.input_s[st] + p.weight_s[st]);
  }
  const double floor = *std::max_element(work.begin(), work.end());
  for (const Policy& policy : Variants()) {
    auto out = Greedy(p, policy, p.micro_batches).Run(best ? best->overlapped : kNever);
    if (!out) {
      failure = out.error();
      continue;
    }
    if (*out && (!best || std::pair((*out)->overlapped, (*out)->step) < std::pair(best->overlapped, best->step))) {
      best = std::move(**out);
    }
    if (best && best->overlapped <= floor * (1 + 1e-3)) break;
  }
  if (!best) return tl::unexpected(*failure);
  Schedule s;
  s.num_stages = p.stages;
  s.num_devices = static_cast<int32_t>(best->order.size());
  s.num_micro_batches = p.micro_batches;
  s.placement.resize(p.stages);
  for (int32_t st = 0; st < p.stages; ++st) s.placement[st] = p.placement.empty() ? st : p.placement[st];
  s.programs.resize(s.num_devices);
  for (int32_t d = 0; d < s.num_devices; ++d) {
    auto& program = s.programs[d];
    program.reserve(best->order[d].size() + 1);
    for (const Placed& op : best->order[d]) {
      program.push_back(Op{.kind = op.kind, .device = d, .stage = op.stage, .micro_batch = op.micro_batch});
    }
    program.push_back(Op{.kind = OpKind::kStep, .device = d});
  }
  Renumber(s);
  return s;
}

}  // namespace twinpipe::ir
