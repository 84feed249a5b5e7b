#include "simulate/runs.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <string>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "ir/json_reader.h"
#include "ir/lines.h"
#include "cost_models/generators.h"
#include "cost_models/plan_costs.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

double Logit(double p) { return std::log(p / (1 - p)); }
double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// Minimises f from x0 (Nelder and Mead 1965; standard coefficients).
std::vector<double> NelderMead(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x0,
                               double step, int iterations) {
  const size_t n = x0.size();
  std::vector<std::vector<double>> p(n + 1, x0);
  for (size_t i = 0; i < n; ++i) p[i + 1][i] += step;
  std::vector<double> v(n + 1);
  for (size_t i = 0; i <= n; ++i) v[i] = f(p[i]);
  auto along = [&](const std::vector<double>& c, const std::vector<double>& x, double t) {
    std::vector<double> y(n);
    for (size_t j = 0; j < n; ++j) y[j] = c[j] + t * (x[j] - c[j]);
    return y;
  };
  for (int it = 0; it < iterations; ++it) {
    std::vector<size_t> order(n + 1);
    for (size_t i = 0; i <= n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<std::vector<double>> q;
    std::vector<double> w;
    for (size_t i : order) {
      q.push_back(p[i]);
      w.push_back(v[i]);
    }
    p = q;
    v = w;
    std::vector<double> c(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) c[j] += p[i][j] / n;
    }
    const auto r = along(c, p[n], -1);
    const double fr = f(r);
    if (fr < v[0]) {
      const auto e = along(c, p[n], -2);
      const double fe = f(e);
      if (fe < fr) {
        p[n] = e, v[n] = fe;
      } else {
        p[n] = r, v[n] = fr;
      }
    } else if (fr < v[n - 1]) {
      p[n] = r, v[n] = fr;
    } else {
      const auto k = along(c, p[n], 0.5);
      const double fk = f(k);
      if (fk < v[n]) {
        p[n] = k, v[n] = fk;
      } else {
        for (size_t i = 1; i <= n; ++i) {
          p[i] = along(p[0], p[i], 0.5);
          v[i] = f(p[i]);
        }
      }
    }
  }
  return p[std::min_element(v.begin(), v.end()) - v.begin()];
}

}  // namespace

namespace {

// One line of a table, read with `r` (which names the file and the line).
Run ReadRun(const ir::json::Reader& r, std::string_view row, int line, const Planner& planner) {
  ir::json::Json j = r.Parse(row);
  if (!j.is_object()) r.Fail("", R"(expected an object {"config": ..., "step_time_s": ...})");
  auto t = j.find("step_time_s");
  // A training step of at most 1e6 s (11.6 days).
  if (t == j.end() || !t->is_number() || !(t->get<double>() > 0) || !(t->get<double>() <= 1e6)) {
    r.Fail("/step_time_s", "expected a positive number of seconds, at most 1e6");
  }
  auto c = j.find("config");
  if (c == j.end() || !c->is_object()) r.Fail("/config", "expected a twinpipe config object");
  // The loader's messages name the line and the path inside the line.
  auto config = cost::LoadConfig(*c, r.source(), "/config");
  if (!config) throw ir::json::ReadError{config.error().message};
  auto plan = planner(*config);
  if (!plan) throw ir::json::ReadError{fmt::format("{}: {}", r.source(), plan.error().message)};
  const std::string& device = config->cluster.devices.at(0).name;
  for (const auto& d : config->cluster.devices) {
    if (d.name != device) r.Fail("/config/cluster", "mixes device kinds; a run is on one (a table may mix them)");
  }
  // The GPU count is /cluster/devices, or the length of a /cluster/device
  // array of names (one kind in a run, checked above): both left out.
  ir::json::Json alike = *c;
  if (auto cluster = alike.find("cluster"); cluster != alike.end() && cluster->is_object()) {
    cluster->erase("devices");
    if (auto names = cluster->find("device"); names != cluster->end() && names->is_array()) *names = device;
  }
  return Run{line, std::move(*config), t->get<double>(), std::move(*plan), alike.dump(), r.source()};
}

}  // namespace

Result<std::vector<Run>> ReadRuns(std::string_view text, std::string_view source, const Planner& planner) {
  return ir::json::TryRead([&] {
    std::vector<Run> runs;
    ir::Lines lines(text);
    for (std::string_view row; lines.Next(row);) {
      if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const ir::json::Reader r(fmt::format("{}:{}", source, lines.number()));
      runs.push_back(ReadRun(r, row, lines.number(), planner));
    }
    if (runs.empty()) throw ir::json::ReadError{fmt::format("{}: no runs", source)};
    return runs;
  });
}

const Calibration* CalibrationFor(const Run& run, std::span<const Calibration* const> calibrations) {
  const Calibration* unnamed = nullptr;
  for (const Calibration* c : calibrations) {
    if (!c) continue;
    if (c->device == run.Device()) return c;
    if (c->device.empty() && !unnamed) unnamed = c;
  }
  return unnamed;
}

Result<std::vector<double>> PredictRuns(const std::vector<Run>& runs, std::span<const Calibration* const> calibrations,
                                        size_t threads) {
  // The runs are independent: each worker simulates the next unclaimed one.
  // Every prediction lands in its own slot and the first failing line (in
  // table order) is the one reported, so the result is the same whatever
  // the thread count.
  std::vector<double> out(runs.size(), 0.0);
  std::vector<std::optional<std::string>> errors(runs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < runs.size();) {
      const Run& r = runs[i];
      try {
        auto sim = Simulate(r.plan.schedule, CostsFromPlan(r.config, r.plan, CalibrationFor(r, calibrations)));
        if (sim) {
          out[i] = sim->step_time_s;
        } else {
          errors[i] = sim.error().message;
        }
      } catch (const std::exception& e) {
        errors[i] = e.what();
      } catch (...) {
        errors[i] = "the simulation threw something that is not a std::exception";
      }
    }
  };
  const size_t workers = std::clamp<size_t>(threads, 1, std::max<size_t>(1, runs.size()));
  std::vector<std::thread> pool;
  try {
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started and this one share the runs.
  }
  work();
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (errors[i]) return Fail(fmt::format("line {}: {}", runs[i].line, *errors[i]));
  }
  return out;
}

std::optional<size_t> ParseThreadCount(std::string_view value) {
  if (value.empty()) return std::nullopt;
  size_t n = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
    if (n > kMostThreads) return std::nullopt;
  }
  if (n < 1) return std::nullopt;
  return n;
}

size_t PredictionThreads() {
  static const size_t threads = [] {
    const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("TWINPIPE_THREADS")) {
      if (const auto n = ParseThreadCount(env)) return *n;
      fmt::print(stderr,
                 "warning: TWINPIPE_THREADS=\"{}\" is not a whole number of threads from 1 to {}: using {} (the "
                 "hardware threads)\n",
                 std::string_view(env), kMostThreads, hardware);
    }
    return hardware;
  }();
  return threads;
}

namespace {

// Below this, moving a coefficient from one end of its range to the other
// changes the runs' step times by less than 0.5% (RMS of the change of ln t):
// they do not determine it.
constexpr double kLeastSensitivity = 0.005;
// Two coefficients whose effects on the runs correlate this closely (the
// cosine of their columns of d ln t / d u at the fit) cannot be told apart.
constexpr double kMostCorrelation = 0.98;
// Positions across a coefficient's range tried before a fit (FitFree).
constexpr int kScanPoints = 10;
// A value within this share of its range's width of an end is at that bound.
constexpr double kBoundShare = 0.005;

constexpr size_t kCoefficients = cost::kProfileCoefficients.size();
using Values = std::array<double, kCoefficients>;  // in ProfileRanges' order
using Ranges = std::array<cost::CoefficientRange, kCoefficients>;

// How the runs move with each coefficient at a point: the local slope of
// every run's ln t in the coefficient's position u in its range (for the
// correlations and the standard errors), and the RMS over the runs of the
// change of ln t from one end of the range to the other (its sensitivity).
struct Effects {
  std::array<std::vector<double>, kCoefficients> slopes;
  Values sensitivity{};
};

// Why a coefficient was held, for its note (written from the final fit).
struct Hold {
  enum class Why { kUndetermined, kCorrelated, kAtBound } why = Why::kUndetermined;
  size_t partner = 0;     // kCorrelated: the coefficient it cannot be told from
  double cosine = 0;      // kCorrelated
  double free_value = 0;  // kAtBound: where the free fit ended
};

// Fits the profile's coefficients (a subset of them at a time) to a table
// of runs: the predictions, the Nelder-Mead fit inside the ranges, the
// effects that decide what to hold.
class ProfileFitter {
 public:
  ProfileFitter(const std::vector<Run>& runs, const cost::Device& device)
      : runs_(runs),
        device_(device.name),
        drift_(device.drift),
        interference_(device.overlap_interference),
        ranges_(cost::ProfileRanges(device)) {}

  const Ranges& ranges() const { return ranges_; }
  bool failed() const { return failed_; }
  double Width(size_t i) const { return ranges_[i].high - ranges_[i].low; }
  double Position(size_t i, double value) const { return (value - ranges_[i].low) / Width(i); }
  double ValueAt(size_t i, double u) const { return ranges_[i].low + Width(i) * u; }

  Calibration At(const Values& v) const {
    Calibration cal;
    cal.device = device_;
    cal.profile = ProfileFit{.runs = static_cast<int>(runs_.size()), .drift = drift_,
                             .overlap_interference = interference_};
    for (size_t i = 0; i < kCoefficients; ++i) (*cal.profile).*cost::kProfileMembers[i].fit = v[i];
    return cal;
  }

  // Each run's predicted ln t; a run that cannot be simulated marks the fit failed.
  std::vector<double> LogPredict(const Values& v) {
    const Calibration cal = At(v);
    auto p = PredictRuns(runs_, &cal);
    if (!p) {
      failed_ = true;
      return std::vector<double>(runs_.size(), 0.0);
    }
    for (double& t : *p) t = std::log(t);
    return *p;
  }

  // The free coefficients fitted from `start` (the others kept) to the
  // least mean absolute relative error, the figure `validate` reports, each
  // as logit(u): the fit cannot leave its range. Least squares would let a
  // run that is off by twice the others pull four times as hard: a table of
  // single-step timings has such runs (the DGX Cloud table's first GPT-3
  // recipe in FP8: 6.44 and 6.72 s at 512 and 1,024 GPUs, where 256 and
  // 2,048 take 5.96 and 6.24).
  Values FitFree(const Values& start, const std::vector<size_t>& free) {
    if (free.empty()) return start;
    auto unpack = [&](const std::vector<double>& x) {
      Values v = start;
      for (size_t f = 0; f < free.size(); ++f) v[free[f]] = ValueAt(free[f], Sigmoid(x[f]));
      return v;
    };
    auto objective = [&](const std::vector<double>& x) {
      const Calibration cal = At(unpack(x));
      auto p = PredictRuns(runs_, &cal);
      if (!p) {
        failed_ = true;
        return 1e300;
      }
      double sum = 0;
      for (size_t i = 0; i < runs_.size(); ++i) sum += std::abs(((*p)[i] - runs_[i].step_time_s) / runs_[i].step_time_s);
      return sum / static_cast<double>(runs_.size());
    };
    std::vector<double> x;
    for (size_t i : free) x.push_back(Logit(std::clamp(Position(i, start[i]), 0.02, 0.98)));
    // Nelder-Mead settles in the minimum nearest its start, and the runs'
    // error has more than one: an op takes the longer of its GPU time and
    // its host's, so the time per framework op moves a run only once it
    // passes the GPU's. First each free coefficient in turn is tried across
    // its range (the others where they are), from the best point so far.
    double best = objective(x);
    for (size_t f = 0; f < free.size(); ++f) {
      for (int step = 0; step < kScanPoints; ++step) {
        std::vector<double> y = x;
        y[f] = Logit((step + 0.5) / kScanPoints);
        if (const double v = objective(y); v < best) {
          best = v;
          x = std::move(y);
        }
      }
    }
    // Two restarts from the best point: Nelder-Mead's simplex can collapse.
    for (int restart = 0; restart < 3; ++restart) x = NelderMead(objective, x, 0.5, 120);
    return unpack(x);
  }

  Effects Measure(const Values& v) {
    Effects e;
    for (size_t i = 0; i < v.size(); ++i) {
      const double u = Position(i, v[i]), h = 0.01;
      const double up = std::min(1.0, u + h), down = std::max(0.0, u - h);
      auto with = [&](double at) {
        Values w = v;
        w[i] = ValueAt(i, at);
        return LogPredict(w);
      };
      const std::vector<double> a = with(up), b = with(down), top = with(1), bottom = with(0);
      e.slopes[i].resize(runs_.size());
      double sum = 0;
      for (size_t r = 0; r < runs_.size(); ++r) {
        e.slopes[i][r] = (a[r] - b[r]) / (up - down);
        sum += std::pow(top[r] - bottom[r], 2);
      }
      e.sensitivity[i] = std::sqrt(sum / static_cast<double>(runs_.size()));
    }
    return e;
  }

 private:
  const std::vector<Run>& runs_;
  std::string device_;
  double drift_;  // held: the device's measured figure (Device::drift)
  double interference_;  // held: Device::overlap_interference
  Ranges ranges_;
  bool failed_ = false;
};

double Cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t r = 0; r < a.size(); ++r) ab += a[r] * b[r], aa += a[r] * a[r], bb += b[r] * b[r];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

// The one free coefficient to hold next, if any: one the runs do not move
// (the least telling first), else the less telling of the most correlated
// pair, else (unless keep_bounds) the most telling of those at a bound.
std::optional<std::pair<size_t, Hold>> NextHold(const ProfileFitter& fitter, const std::vector<size_t>& free,
                                               const Values& values, const Effects& e, bool keep_bounds) {
  std::optional<std::pair<size_t, Hold>> hold;
  for (size_t i : free) {
    if (e.sensitivity[i] < kLeastSensitivity && (!hold || e.sensitivity[i] < e.sensitivity[hold->first])) {
      hold = {{i, Hold{Hold::Why::kUndetermined}}};
    }
  }
  if (hold) return hold;
  double most = kMostCorrelation;
  for (size_t a = 0; a < free.size(); ++a) {
    for (size_t b = a + 1; b < free.size(); ++b) {
      const size_t i = free[a], j = free[b];
      const double cosine = Cosine(e.slopes[i], e.slopes[j]);
      if (std::abs(cosine) < most) continue;
      most = std::abs(cosine);
      const size_t weaker = e.sensitivity[i] < e.sensitivity[j] ? i : j;
      hold = {{weaker, Hold{Hold::Why::kCorrelated, weaker == i ? j : i, cosine}}};
    }
  }
  if (hold || keep_bounds) return hold;
  for (size_t i : free) {
    const double u = fitter.Position(i, values[i]);
    if (u > kBoundShare && u < 1 - kBoundShare) continue;
    if (hold && e.sensitivity[i] <= e.sensitivity[hold->first]) continue;
    hold = {{i, Hold{Hold::Why::kAtBound, 0, 0, values[i]}}};
  }
  return hold;
}

// Inverse of a small symmetric positive matrix (Gauss-Jordan with partial
// pivoting); nullopt where it is singular to working precision (a pivot
// below 1e-12 of the largest diagonal element).
std::optional<std::vector<std::vector<double>>> Inverse(std::vector<std::vector<double>> a) {
  const size_t n = a.size();
  double scale = 0;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(a[i][i]));
  std::vector<std::vector<double>> inv(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) inv[i][i] = 1;
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    if (!(std::abs(a[p][c]) > 1e-12 * scale)) return std::nullopt;
    std::swap(a[p], a[c]);
    std::swap(inv[p], inv[c]);
    const double pivot = a[c][c];
    for (size_t j = 0; j < n; ++j) a[c][j] /= pivot, inv[c][j] /= pivot;
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c];
      for (size_t j = 0; j < n; ++j) a[r][j] -= f * a[c][j], inv[r][j] -= f * inv[c][j];
    }
  }
  return inv;
}

// Standard errors of the free coefficients, in their units: the square
// roots of the diagonal of s^2 (J^T J)^-1, J the slopes in u, s^2 the
// residuals' variance over runs - free degrees of freedom: the linearised
// spread about the fit (for an absolute-error fit under normal residuals
// the spread is sqrt(pi / 2) = 1.25 times that; it is a scale, not an
// interval). None where there are no degrees of freedom left or J^T J is
// singular: the runs do not determine them jointly.
std::array<std::optional<double>, kCoefficients> StandardErrors(const ProfileFitter& fitter,
                                                                const std::vector<size_t>& free, const Effects& e,
                                                                const std::vector<double>& log_predicted,
                                                                const std::vector<Run>& runs) {
  std::array<std::optional<double>, kCoefficients> out;
  const auto dof = static_cast<std::ptrdiff_t>(runs.size()) - static_cast<std::ptrdiff_t>(free.size());
  if (free.empty() || dof <= 0) return out;
  double residuals = 0;
  for (size_t r = 0; r < runs.size(); ++r) residuals += std::pow(log_predicted[r] - std::log(runs[r].step_time_s), 2);
  const double variance = residuals / static_cast<double>(dof);
  std::vector<std::vector<double>> normal(free.size(), std::vector<double>(free.size(), 0.0));
  for (size_t a = 0; a < free.size(); ++a) {
    for (size_t b = 0; b < free.size(); ++b) {
      for (size_t r = 0; r < runs.size(); ++r) normal[a][b] += e.slopes[free[a]][r] * e.slopes[free[b]][r];
    }
  }
  const auto inverse = Inverse(normal);
  if (!inverse) return out;
  for (size_t a = 0; a < free.size(); ++a) {
    if ((*inverse)[a][a] < 0) continue;
    out[free[a]] = std::sqrt(variance * (*inverse)[a][a]) * fitter.Width(free[a]);
  }
  return out;
}

// The runs that pull free coefficient `i` hardest at the fit (see
// CoefficientFit::pulled_by): each run's term of the objective's gradient
// in u_i, -sign(p - m) d ln p / du_i (the gradient of the mean |ln p - ln m|,
// the mean absolute relative error to first order: how far off a run is
// does not weigh it; a run within kQuietFit of its measurement, one the fit
// passes through, pulls nothing: its sign there is the fit's rounding), as
// a share of the terms' absolute sum; the kPullsEachWay largest each way,
// largest first, none where the runs are fitted to within kQuietFit (RMS).
std::vector<cost::CoefficientFit::Pull> Pulls(const std::vector<double>& slopes,
                                              const std::vector<double>& log_predicted, const std::vector<Run>& runs) {
  std::vector<cost::CoefficientFit::Pull> pulls;
  double squares = 0, total = 0;
  std::vector<double> terms(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    const double ratio = std::exp(log_predicted[r]) / runs[r].step_time_s;
    squares += (ratio - 1) * (ratio - 1);
    const double sign = ratio > 1 + cost::kQuietFit ? 1.0 : ratio < 1 - cost::kQuietFit ? -1.0 : 0.0;
    terms[r] = -sign * slopes[r];
    total += std::abs(terms[r]);
  }
  if (runs.empty() || std::sqrt(squares / static_cast<double>(runs.size())) < cost::kQuietFit || !(total > 0)) {
    return pulls;
  }
  std::vector<size_t> order(runs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return std::abs(terms[a]) > std::abs(terms[b]); });
  size_t up = 0, down = 0;
  for (const size_t r : order) {
    if (!(terms[r] != 0)) break;
    size_t& way = terms[r] > 0 ? up : down;
    if (way == cost::kPullsEachWay) continue;
    ++way;
    pulls.push_back({.line = runs[r].line, .share = terms[r] / total});
  }
  return pulls;
}

std::string HoldNote(const cost::CoefficientRange& range, double catalogue, const Hold& hold, double sensitivity,
                     const cost::CoefficientRange& partner) {
  switch (hold.why) {
    case Hold::Why::kUndetermined:
      return fmt::format(
          "held at the catalogue's {:.4g}: from one end of its range [{:.4g}, {:.4g}] to the other it moves these "
          "runs' step times by {:.2f}% (RMS); they do not determine it",
          catalogue, range.low, range.high, 100 * sensitivity);
    case Hold::Why::kCorrelated:
      return fmt::format(
          "held at the catalogue's {:.4g}: on these runs its effect and {}'s correlate at {:.3f}; they cannot be told "
          "apart",
          catalogue, partner.name, hold.cosine);
    case Hold::Why::kAtBound: {
      const bool upper = hold.free_value > (range.low + range.high) / 2;
      return fmt::format(
          "held at the catalogue's {:.4g}: fitted freely it ends at its {} bound, {:.4g} of [{:.4g}, {:.4g}] ({}); "
          "the runs ask for {} than that, so the model lacks a cost they show, or counts one they do not, and a "
          "value there is not the physical figure its name says",
          catalogue, upper ? "upper" : "lower", hold.free_value, range.low, range.high, range.why,
          upper ? "more" : "less");
    }
  }
  return "";
}

}  // namespace

Result<Calibration> FitRuns(const std::vector<Run>& runs, const FitOptions& options) {
  for (const Run& r : runs) {
    if (r.Device() == runs.front().Device()) continue;
    return Fail(fmt::format("{}: /config/cluster/device: '{}', but line {} runs on '{}': a profile is fitted to one "
                            "device kind; fit each kind's runs apart (scripts/published_runs.py --gpu NAME keeps one "
                            "kind's rows)",
                            r.source, r.Device(), runs.front().line, runs.front().Device()));
  }
  const cost::Device& d = runs.front().config.cluster.devices.front();
  ProfileFitter fitter(runs, d);
  const Ranges& ranges = fitter.ranges();
  Values catalogue;
  for (size_t i = 0; i < kCoefficients; ++i) {
    catalogue[i] = std::clamp(d.*cost::kProfileMembers[i].device, ranges[i].low, ranges[i].high);
  }
  // Fit the free coefficients, hold one the runs cannot determine (or push
  // to a bound), refit from where the fit was; at most one round per
  // coefficient and a last one.
  Values values = catalogue;
  std::array<std::optional<Hold>, kCoefficients> held;
  std::vector<size_t> free(kCoefficients);
  std::iota(free.begin(), free.end(), size_t{0});
  while (true) {
    values = fitter.FitFree(values, free);
    if (fitter.failed()) return FailRuntime("a run could not be simulated while fitting");
    const Effects effects = fitter.Measure(values);
    const auto hold = NextHold(fitter, free, values, effects, options.keep_bounds);
    if (!hold) break;
    held[hold->first] = hold->second;
    values[hold->first] = catalogue[hold->first];
    free.erase(std::find(free.begin(), free.end(), hold->first));
  }
  const Effects effects = fitter.Measure(values);
  const std::vector<double> log_predicted = fitter.LogPredict(values);
  if (fitter.failed()) return FailRuntime("a run could not be simulated while fitting");
  const auto errors = StandardErrors(fitter, free, effects, log_predicted, runs);
  Calibration cal = fitter.At(values);
  ProfileFit& fit = *cal.profile;
  for (size_t i = 0; i < values.size(); ++i) {
    cost::CoefficientFit c;
    c.value = values[i];
    c.low = ranges[i].low;
    c.high = ranges[i].high;
    c.sensitivity = effects.sensitivity[i];
    c.std_error = errors[i];
    const double u = fitter.Position(i, values[i]);
    if (held[i]) {
      c.status = cost::CoefficientFit::Status::kHeld;
      c.note = HoldNote(ranges[i], catalogue[i], *held[i], effects.sensitivity[i], ranges[held[i]->partner]);
    } else if (u <= kBoundShare || u >= 1 - kBoundShare) {
      const bool upper = u >= 1 - kBoundShare;
      c.status = upper ? cost::CoefficientFit::Status::kAtUpperBound : cost::CoefficientFit::Status::kAtLowerBound;
      c.note = fmt::format(
          "ends at its {} bound, {:.4g} of [{:.4g}, {:.4g}] ({}): the runs ask for {} than that, so the model "
          "lacks a cost they show, or counts one they do not; the value is not the physical figure its name says",
          upper ? "upper" : "lower", values[i], ranges[i].low, ranges[i].high, ranges[i].why, upper ? "more" : "less");
    }
    if (!held[i]) c.pulled_by = Pulls(effects.slopes[i], log_predicted, runs);
    if (!c.note.empty()) fit.warnings.push_back(fmt::format("{} {}", ranges[i].name, c.note));
    fit.coefficients.push_back(std::move(c));
  }
  std::vector<const cost::Config*> configs;  // what the fit saw, so that predictions beyond it say so
  for (const Run& r : runs) configs.push_back(&r.config);
  cal.coverage = cost::CoverageOf(configs);
  return cal;
}

namespace {

constexpr std::array<std::string_view, 3> kParametersGroups{"<10", "10-100", ">=100"};  // billions

int ParametersGroupIndex(double params) { return params < 10e9 ? 0 : params < 100e9 ? 1 : 2; }

// A group of the summary: its key, then the value's rank (a number's own
// value, a bucket's place), then the value's text, in that order.
struct GroupKey {
  std::string key;
  int64_t rank = 0;
  std::string value;
  auto operator<=>(const GroupKey&) const = default;
};

GroupKey Numbered(std::string key, int64_t value) { return {std::move(key), value, std::to_string(value)}; }

}  // namespace

std::string_view ParametersGroup(double params) { return kParametersGroups[ParametersGroupIndex(params)]; }

namespace {

// Validation::scaling from the runs and their errors (both in table order).
std::vector<Validation::Scaling> WeakScaling(const std::vector<Run>& runs, const std::vector<RunError>& rows) {
  std::map<std::string_view, std::vector<size_t>> alike;  // runs by their config less the GPU count
  std::vector<std::string_view> order;                    // the sets by their first line
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].alike.empty()) continue;
    auto& set = alike[runs[i].alike];
    if (set.empty()) order.push_back(runs[i].alike);
    set.push_back(i);
  }
  std::vector<Validation::Scaling> out;
  for (std::string_view key : order) {
    const std::vector<size_t>& set = alike.at(key);
    const auto gpus = [&](size_t i) { return runs[i].config.cluster.NumDevices(); };
    // The first run in table order at the fewest GPUs and at the most; the
    // steps compared are the means over the runs at each count.
    size_t fewest = set.front(), most = set.front();
    for (size_t i : set) {
      if (gpus(i) < gpus(fewest)) fewest = i;
      if (gpus(i) > gpus(most)) most = i;
    }
    if (gpus(fewest) == gpus(most)) continue;
    // Mean measured and predicted step of the set's runs at `count` GPUs.
    const auto mean_at = [&](int count) {
      double measured = 0, predicted = 0;
      int n = 0;
      for (size_t i : set) {
        if (gpus(i) != count) continue;
        measured += rows[i].measured_s;
        predicted += rows[i].predicted_s;
        ++n;
      }
      return std::pair{measured / n, predicted / n};
    };
    const auto [measured_a, predicted_a] = mean_at(gpus(fewest));
    const auto [measured_b, predicted_b] = mean_at(gpus(most));
    out.push_back({static_cast<int>(set.size()), rows[fewest], rows[most], gpus(fewest), gpus(most),
                   measured_b / measured_a - 1, predicted_b / predicted_a - 1});
  }
  return out;
}

}  // namespace

Result<Validation> ValidateRuns(const std::vector<Run>& runs, std::span<const Calibration* const> calibrations) {
  auto predicted = PredictRuns(runs, calibrations);
  if (!predicted) return tl::unexpected(predicted.error());
  Validation v;
  std::map<GroupKey, std::vector<double>> groups;
  const bool calibrated = std::any_of(calibrations.begin(), calibrations.end(), [](const auto* c) { return c; });
  const bool kinds = std::any_of(runs.begin(), runs.end(), [&](const Run& r) { return r.Device() != runs[0].Device(); });
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    if (calibrated && !CalibrationFor(r, calibrations)) v.uncalibrated.push_back(r.line);
    RunError e{r.line, r.step_time_s, (*predicted)[i], ((*predicted)[i] - r.step_time_s) / r.step_time_s};
    if (kinds) groups[GroupKey{"device", 0, r.Device()}].push_back(e.error);
    v.rows.push_back(e);
    v.mape += std::abs(e.error) / runs.size();
    v.bias += e.error / runs.size();
    const int size = ParametersGroupIndex(ModelParameters(r.config));
    for (GroupKey key : {Numbered("pipeline_parallel", r.config.pipeline.stages),
                         Numbered("tensor_parallel", r.config.pipeline.tensor_parallel),
                         Numbered("data_parallel", r.config.Replicas()),
                         Numbered("micro_batch", r.config.training.MicroBatchSize()),
                         Numbered("gpus", r.config.cluster.NumDevices()),
                         GroupKey{"precision", 0, std::string(cost::DtypeName(r.config.model.dtype))},
                         GroupKey{"params_billions", size, std::string(kParametersGroups[size])}}) {
      groups[std::move(key)].push_back(e.error);
    }
  }
  for (const auto& [key, errors] : groups) {
    ErrorGroup g{key.key, key.value, static_cast<int>(errors.size())};
    for (double e : errors) {
      g.mape += std::abs(e) / errors.size();
      g.bias += e / errors.size();
    }
    v.groups.push_back(g);
  }
  v.worst = v.rows;
  std::stable_sort(v.worst.begin(), v.worst.end(),
                   [](const RunError& a, const RunError& b) { return std::abs(a.error) > std::abs(b.error); });
  if (v.worst.size() > 10) v.worst.resize(10);
  v.scaling = WeakScaling(runs, v.rows);
  for (const auto& s : v.scaling) {
    v.scaling_measured += s.measured_growth / v.scaling.size();
    v.scaling_predicted += s.predicted_growth / v.scaling.size();
  }
  return v;
}

}  // namespace twinpipe::simulate
