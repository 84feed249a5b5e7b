#include "simulate/runs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

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

// One line of a table, read with `r` (which names the file and the line);
// `earlier` are the lines before it.
Run ReadRun(const ir::json::Reader& r, std::string_view row, int line, const Planner& planner,
            const std::vector<Run>& earlier) {
  ir::json::Json j = r.Parse(row);
  if (!j.is_object()) r.Fail("", R"(expected an object {"config": ..., "step_time_s": ...})");
  auto t = j.find("step_time_s");
  if (t == j.end() || !t->is_number() || !(t->get<double>() > 0) || !std::isfinite(t->get<double>())) {
    r.Fail("/step_time_s", "expected a positive number of seconds");
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
    if (d.name != device) r.Fail("/config/cluster", "mixes device kinds; a run table is of one");
  }
  if (!earlier.empty() && earlier.front().config.cluster.devices.at(0).name != device) {
    const Run& first = earlier.front();
    r.Fail("/config/cluster/device", fmt::format("'{}', but line {} runs on '{}'; a table is of one device kind", device,
                                                 first.line, first.config.cluster.devices.at(0).name));
  }
  return Run{line, std::move(*config), t->get<double>(), std::move(*plan)};
}

}  // namespace

Result<std::vector<Run>> ReadRuns(std::string_view text, std::string_view source, const Planner& planner) {
  return ir::json::TryRead([&] {
    std::vector<Run> runs;
    ir::Lines lines(text);
    for (std::string_view row; lines.Next(row);) {
      if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const ir::json::Reader r(fmt::format("{}:{}", source, lines.number()));
      runs.push_back(ReadRun(r, row, lines.number(), planner, runs));
    }
    if (runs.empty()) throw ir::json::ReadError{fmt::format("{}: no runs", source)};
    return runs;
  });
}

Result<std::vector<double>> PredictRuns(const std::vector<Run>& runs, const Calibration* cal) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const Run& r : runs) {
    auto sim = Simulate(r.plan.schedule, CostsFromPlan(r.config, r.plan, cal));
    if (!sim) return Fail(fmt::format("line {}: {}", r.line, sim.error().message));
    out.push_back(sim->step_time_s);
  }
  return out;
}

namespace {

// Below this, moving a coefficient across its whole range changes the runs'
// step times by less than 0.5% (RMS of d ln t / d u): they do not determine it.
constexpr double kLeastSensitivity = 0.005;
// Two coefficients whose effects on the runs correlate this closely (the
// cosine of their columns of d ln t / d u) cannot be told apart.
constexpr double kMostCorrelation = 0.98;
// A value within this share of its range's width of an end is at that bound.
constexpr double kBoundShare = 0.005;

using Values = std::array<double, 4>;  // in ProfileRanges' order

Calibration ProfileCalibration(const std::string& device, const Values& v, int runs) {
  Calibration cal;
  cal.device = device;
  cal.profile = ProfileFit{v[0], v[1], v[2], v[3], runs};
  return cal;
}

double Width(size_t i) { return cost::ProfileRanges()[i].high - cost::ProfileRanges()[i].low; }
double Position(size_t i, double value) { return (value - cost::ProfileRanges()[i].low) / Width(i); }
double ValueAt(size_t i, double u) { return cost::ProfileRanges()[i].low + Width(i) * u; }

// The catalogue's values, each brought into its range.
Values CatalogueValues(const cost::Device& d) {
  const Values v{d.gemm_efficiency, d.bandwidth_efficiency, d.launch_overhead_s, d.kernel_floor_s};
  Values out;
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::clamp(v[i], cost::ProfileRanges()[i].low, cost::ProfileRanges()[i].high);
  return out;
}

// Inverse of a small symmetric positive matrix (Gauss-Jordan with partial
// pivoting); nullopt where it is singular.
std::optional<std::vector<std::vector<double>>> Inverse(std::vector<std::vector<double>> a) {
  const size_t n = a.size();
  std::vector<std::vector<double>> inv(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) inv[i][i] = 1;
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    if (std::abs(a[p][c]) < 1e-300) return std::nullopt;
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

}  // namespace

Result<Calibration> FitRuns(const std::vector<Run>& runs, const FitOptions& options) {
  const cost::Device& d = runs.front().config.cluster.devices.front();
  const auto& ranges = cost::ProfileRanges();
  const int count = static_cast<int>(runs.size());
  const Values catalogue = CatalogueValues(d);
  bool failed = false;
  auto predict = [&](const Values& v) {
    const Calibration cal = ProfileCalibration(d.name, v, count);
    auto p = PredictRuns(runs, &cal);
    if (!p) {
      failed = true;
      return std::vector<double>(runs.size(), 1e300);
    }
    return *p;
  };
  Values values = catalogue;
  std::array<bool, 4> held{};
  std::array<std::string, 4> notes;
  std::array<std::vector<double>, 4> columns;  // d ln t / d u per run
  std::array<double, 4> sensitivity{};
  for (size_t round = 0; round <= values.size(); ++round) {
    std::vector<size_t> free;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!held[i]) free.push_back(i);
    }
    // Each free coefficient at its position u in its range, as logit(u):
    // the fit cannot leave the range.
    auto unpack = [&](const std::vector<double>& x) {
      Values v = values;
      for (size_t f = 0; f < free.size(); ++f) v[free[f]] = ValueAt(free[f], Sigmoid(x[f]));
      return v;
    };
    auto objective = [&](const std::vector<double>& x) {
      const std::vector<double> p = predict(unpack(x));
      if (failed) return 1e300;
      double sum = 0;
      for (size_t i = 0; i < runs.size(); ++i) {
        const double e = (p[i] - runs[i].step_time_s) / runs[i].step_time_s;
        sum += e * e;
      }
      return sum / static_cast<double>(runs.size());
    };
    if (!free.empty()) {
      std::vector<double> x;
      for (size_t i : free) x.push_back(Logit(std::clamp(Position(i, catalogue[i]), 0.02, 0.98)));
      // Two restarts from the best point: Nelder-Mead's simplex can collapse.
      for (int restart = 0; restart < 3; ++restart) x = NelderMead(objective, x, 0.5, 120);
      values = unpack(x);
    }
    if (failed) return FailRuntime("a run could not be simulated while fitting");
    // How each coefficient moves the runs: central differences in u (one-
    // sided at an end of the range).
    for (size_t i = 0; i < values.size(); ++i) {
      const double u = Position(i, values[i]), h = 0.01;
      const double up = std::min(1.0, u + h), down = std::max(0.0, u - h);
      Values a = values, b = values;
      a[i] = ValueAt(i, up);
      b[i] = ValueAt(i, down);
      const std::vector<double> pa = predict(a), pb = predict(b);
      columns[i].assign(runs.size(), 0.0);
      double sum = 0;
      for (size_t r = 0; r < runs.size(); ++r) {
        columns[i][r] = (std::log(pa[r]) - std::log(pb[r])) / (up - down);
        sum += columns[i][r] * columns[i][r];
      }
      sensitivity[i] = std::sqrt(sum / static_cast<double>(runs.size()));
    }
    if (failed) return FailRuntime("a run could not be simulated while fitting");
    // Hold one coefficient the runs do not determine, or the less telling of
    // two they cannot tell apart, at the catalogue's value; then refit.
    std::optional<size_t> hold;
    for (size_t i : free) {
      if (sensitivity[i] < kLeastSensitivity && (!hold || sensitivity[i] < sensitivity[*hold])) {
        hold = i;
        notes[i] = fmt::format(
            "held at the catalogue's {:.4g}: across its range [{:.4g}, {:.4g}] it moves these runs' step times by "
            "{:.2f}% (RMS); they do not determine it",
            catalogue[i], ranges[i].low, ranges[i].high, 100 * sensitivity[i]);
      }
    }
    if (!hold) {
      double most = kMostCorrelation;
      for (size_t a = 0; a < free.size(); ++a) {
        for (size_t b = a + 1; b < free.size(); ++b) {
          const size_t i = free[a], j = free[b];
          double dot = 0;
          for (size_t r = 0; r < runs.size(); ++r) dot += columns[i][r] * columns[j][r];
          const double n = static_cast<double>(runs.size());
          const double cosine = dot / (n * sensitivity[i] * sensitivity[j]);
          if (std::abs(cosine) < most) continue;
          most = std::abs(cosine);
          const size_t weaker = sensitivity[i] < sensitivity[j] ? i : j, other = weaker == i ? j : i;
          hold = weaker;
          notes[weaker] = fmt::format(
              "held at the catalogue's {:.4g}: on these runs its effect and {}'s correlate at {:.3f}; they cannot "
              "be told apart",
              catalogue[weaker], ranges[other].name, cosine);
        }
      }
    }
    // A coefficient pushed to an end of its physical range is no longer the
    // quantity it names: the runs show a cost the model lacks, or lack one it
    // has. Hold the one the runs move most at the catalogue's (sourced)
    // value, so that what is carried to other runs stays physical, and say so.
    if (!hold && !options.keep_bounds) {
      for (size_t i : free) {
        const double u = Position(i, values[i]);
        if (u > kBoundShare && u < 1 - kBoundShare) continue;
        if (hold && sensitivity[i] <= sensitivity[*hold]) continue;
        hold = i;
        const bool upper = u >= 1 - kBoundShare;
        notes[i] = fmt::format(
            "held at the catalogue's {:.4g}: fitted freely it ends at its {} bound, {:.4g} of [{:.4g}, {:.4g}] ({}); "
            "the runs ask for {} than that, so the model lacks a cost they show, or counts one they do not, and a "
            "value there is not the physical figure its name says",
            catalogue[i], upper ? "upper" : "lower", values[i], ranges[i].low, ranges[i].high, ranges[i].why,
            upper ? "more" : "less");
      }
    }
    if (!hold) break;
    held[*hold] = true;
    values[*hold] = catalogue[*hold];
  }
  // Standard errors from the covariance of the free coefficients:
  // s^2 (J^T J)^-1, J in u, s^2 the residuals' variance.
  std::vector<size_t> free;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!held[i]) free.push_back(i);
  }
  const std::vector<double> predicted = predict(values);
  double residuals = 0;
  for (size_t r = 0; r < runs.size(); ++r) residuals += std::pow(std::log(predicted[r] / runs[r].step_time_s), 2);
  const double variance = residuals / std::max<double>(1, static_cast<double>(runs.size() - free.size()));
  std::vector<std::vector<double>> normal(free.size(), std::vector<double>(free.size(), 0.0));
  for (size_t a = 0; a < free.size(); ++a) {
    for (size_t b = 0; b < free.size(); ++b) {
      for (size_t r = 0; r < runs.size(); ++r) normal[a][b] += columns[free[a]][r] * columns[free[b]][r];
    }
  }
  const auto inverse = Inverse(normal);
  Calibration cal = ProfileCalibration(d.name, values, count);
  ProfileFit& fit = *cal.profile;
  for (size_t i = 0; i < values.size(); ++i) {
    cost::CoefficientFit c;
    c.value = values[i];
    c.low = ranges[i].low;
    c.high = ranges[i].high;
    c.sensitivity = sensitivity[i];
    const double u = Position(i, values[i]);
    if (held[i]) {
      c.status = cost::CoefficientFit::Status::kHeld;
      c.note = notes[i];
    } else {
      const size_t at = std::find(free.begin(), free.end(), i) - free.begin();
      c.std_error = inverse ? std::sqrt(std::max(0.0, variance * (*inverse)[at][at])) * Width(i) : Width(i);
      if (u <= kBoundShare || u >= 1 - kBoundShare) {
        const bool upper = u >= 1 - kBoundShare;
        c.status = upper ? cost::CoefficientFit::Status::kAtUpperBound : cost::CoefficientFit::Status::kAtLowerBound;
        c.note = fmt::format(
            "ends at its {} bound, {:.4g} of [{:.4g}, {:.4g}] ({}): the runs ask for {} than that, so the model "
            "lacks a cost they show, or counts one they do not; the value is not the physical figure its name says",
            upper ? "upper" : "lower", values[i], ranges[i].low, ranges[i].high, ranges[i].why,
            upper ? "more" : "less");
      }
    }
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

Result<Validation> ValidateRuns(const std::vector<Run>& runs, const Calibration* cal) {
  auto predicted = PredictRuns(runs, cal);
  if (!predicted) return tl::unexpected(predicted.error());
  Validation v;
  std::map<GroupKey, std::vector<double>> groups;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    RunError e{r.line, r.step_time_s, (*predicted)[i], ((*predicted)[i] - r.step_time_s) / r.step_time_s};
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
  return v;
}

}  // namespace twinpipe::simulate
