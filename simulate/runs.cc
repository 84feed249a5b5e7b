#include "simulate/runs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>

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

Calibration ProfileCalibration(const std::string& device, double gemm, double bandwidth, double launch, double floor,
                               int runs) {
  Calibration cal;
  cal.device = device;
  cal.profile = ProfileFit{gemm, bandwidth, launch, floor, runs};
  return cal;
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

// The most of its memory bandwidth a streaming kernel reaches: the fit
// keeps the bandwidth fraction below it (STREAM-class copy and triad kernels
// reach 80 to 90% of an HBM GPU's peak; the catalogue assumes 80%).
constexpr double kMostBandwidthFraction = 0.9;

Result<Calibration> FitRuns(const std::vector<Run>& runs) {
  const cost::Device& d = runs.front().config.cluster.devices.front();
  bool failed = false;
  auto unpack = [&](const std::vector<double>& x) {
    return ProfileCalibration(d.name, Sigmoid(x[0]), kMostBandwidthFraction * Sigmoid(x[1]), std::exp(x[2]),
                              std::exp(x[3]), static_cast<int>(runs.size()));
  };
  auto objective = [&](const std::vector<double>& x) {
    const Calibration cal = unpack(x);
    auto predicted = PredictRuns(runs, &cal);
    if (!predicted) {
      failed = true;
      return 1e300;
    }
    double sum = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      const double e = ((*predicted)[i] - runs[i].step_time_s) / runs[i].step_time_s;
      sum += e * e;
    }
    return sum / static_cast<double>(runs.size());
  };
  const double launch = d.launch_overhead_s > 0 ? d.launch_overhead_s : 1e-6;
  const double floor = d.kernel_floor_s > 0 ? d.kernel_floor_s : 1e-7;
  std::vector<double> x{Logit(std::clamp(d.gemm_efficiency, 0.05, 0.95)),
                        Logit(std::clamp(d.bandwidth_efficiency / kMostBandwidthFraction, 0.05, 0.95)),
                        std::log(launch), std::log(floor)};
  // Two restarts from the best point: Nelder-Mead's simplex can collapse.
  for (int round = 0; round < 3; ++round) x = NelderMead(objective, x, 0.5, 120);
  if (failed) return FailRuntime("a run could not be simulated while fitting");
  Calibration fitted = unpack(x);
  std::vector<const cost::Config*> configs;  // what the fit saw, so that predictions beyond it say so
  for (const Run& r : runs) configs.push_back(&r.config);
  fitted.coverage = cost::CoverageOf(configs);
  return fitted;
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
