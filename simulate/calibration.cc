#include "simulate/calibration.h"

#include <cmath>
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost_models/compute_model.h"

namespace twinpipe::simulate {
namespace {

// Least squares with a ridge pulling the first `pulled` unknowns towards
// `prior`: (X^T X + lambda P) theta = X^T y + lambda P prior.
std::vector<double> Solve(const std::vector<std::vector<double>>& X, const std::vector<double>& y, size_t pulled,
                          double prior) {
  const size_t n = X.empty() ? 0 : X[0].size();
  std::vector<std::vector<double>> A(n, std::vector<double>(n + 1, 0.0));
  for (size_t r = 0; r < X.size(); ++r) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) A[i][j] += X[r][i] * X[r][j];
      A[i][n] += X[r][i] * y[r];
    }
  }
  // One ridge for the pulled unknowns, scaled to the largest of their
  // columns: what the data cannot tell apart (a layer kind that only ever
  // shares a cell with another) stays at the prior.
  double largest = 0;
  for (size_t i = 0; i < pulled; ++i) largest = std::max(largest, A[i][i]);
  const double lambda = 1e-3 * largest + 1e-300;
  for (size_t i = 0; i < pulled; ++i) {
    A[i][i] += lambda;
    A[i][n] += lambda * prior;
  }
  for (size_t col = 0; col < n; ++col) {  // Gaussian elimination with partial pivoting
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r) {
      if (std::abs(A[r][col]) > std::abs(A[pivot][col])) pivot = r;
    }
    std::swap(A[col], A[pivot]);
    if (A[col][col] == 0) continue;
    for (size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = A[r][col] / A[col][col];
      for (size_t k = col; k <= n; ++k) A[r][k] -= f * A[col][k];
    }
  }
  std::vector<double> theta(n, 0.0);
  for (size_t i = 0; i < n; ++i) theta[i] = A[i][i] != 0 ? A[i][n] / A[i][i] : 0;
  return theta;
}

}  // namespace

Result<Calibration> FitCalibration(const cost::Config& c, const cost::Plan& plan,
                                   const std::vector<traces::Trace>& measured) {
  return FitCalibration({MeasuredRuns{&c, &plan, measured}});
}

Result<Calibration> FitCalibration(const std::vector<MeasuredRuns>& runs) {
  if (runs.empty()) return Fail("no measured runs to calibrate from");
  Calibration cal;
  const cost::Config& first = *runs.front().config;
  cal.device = first.cluster.devices[0].name;
  std::vector<std::string> kinds;  // layer kinds, in first-seen order
  for (const MeasuredRuns& run : runs) {
    const ir::Schedule& s = run.plan->schedule;
    for (const auto& d : run.config->cluster.devices) {
      if (d.name != cal.device) {
        return Fail(fmt::format("runs on {} and on {}: a calibration is of one device kind", cal.device, d.name));
      }
    }
    for (const auto& l : run.config->model.layers) {
      if (std::find(kinds.begin(), kinds.end(), l.kind) == kinds.end()) kinds.push_back(l.kind);
    }
    for (const auto& t : run.traces) {
      if (t.stages != s.num_stages || t.micro_batches != s.num_micro_batches || t.placement != s.placement) {
        return Fail(fmt::format("a trace of {} stages and {} micro-batches does not fit the config's plan ({} and {})",
                                t.stages, t.micro_batches, s.num_stages, s.num_micro_batches));
      }
    }
  }
  for (ir::OpKind kind : {ir::OpKind::kForward, ir::OpKind::kBackward, ir::OpKind::kBackwardInput,
                          ir::OpKind::kBackwardWeight, ir::OpKind::kRecompute}) {
    // One row per run and stage: the median duration of its ops of this kind
    // (a preempted op on a busy machine would drag a mean), weighted by count.
    std::vector<std::vector<double>> X;
    std::vector<double> y;
    for (const MeasuredRuns& run : runs) {
      const cost::Config& c = *run.config;
      std::map<int32_t, std::vector<double>> durations;
      for (const auto& t : run.traces) {
        for (const auto& e : t.events) {
          if (e.kind == kind) durations[e.stage].push_back(e.end_s - e.start_s);
        }
      }
      for (auto& [stage, d] : durations) {
        std::sort(d.begin(), d.end());
        const double median = d.size() % 2 ? d[d.size() / 2] : (d[d.size() / 2 - 1] + d[d.size() / 2]) / 2;
        const auto& cell = run.plan->partition.cells[stage];
        const cost::Device& dev = c.cluster.devices[run.plan->schedule.placement[stage]];
        std::vector<double> row(kinds.size() + 1, 0.0);
        for (int i = cell.first_layer; i <= cell.last_layer; ++i) {
          const auto j = std::find(kinds.begin(), kinds.end(), c.model.layers[i].kind) - kinds.begin();
          row[j] += cost::RooflineOpTime(c, i, kind, dev);
        }
        row.back() = cell.last_layer - cell.first_layer + 1;  // the fixed time is per layer
        for (size_t k = 0; k < d.size(); ++k) {
          X.push_back(row);
          y.push_back(median);
        }
      }
    }
    if (X.empty()) continue;
    if (*std::max_element(y.begin(), y.end()) <= 0) {
      return Fail(fmt::format("every {} op of the traces lasts 0 s (end_s = start_s): a trace of no measured time "
                              "fits no cost model", ir::OpKindName(kind)));
    }
    // Scales are pulled towards the mean measured/predicted ratio.
    double measured_sum = 0, predicted_sum = 0;
    for (size_t r = 0; r < X.size(); ++r) {
      measured_sum += y[r];
      for (size_t j = 0; j < kinds.size(); ++j) predicted_sum += X[r][j];
    }
    const double prior = predicted_sum > 0 ? measured_sum / predicted_sum : 1;
    auto theta = Solve(X, y, kinds.size(), prior);
    if (theta.back() < 0) {
      // A negative fixed time is unphysical (the roofline grows slower with
      // the samples than the measured ops): refit the scales without it,
      // rather than keep scales that leaned on it.
      for (auto& row : X) row.back() = 0;
      theta = Solve(X, y, kinds.size(), prior);
    }
    OpFit fit;
    fit.samples = static_cast<int>(X.size());
    for (size_t j = 0; j < kinds.size(); ++j) fit.scale[kinds[j]] = std::max(0.0, theta[j]);
    fit.overhead_per_layer_s = std::max(0.0, theta.back());
    cal.compute[std::string(ir::OpKindName(kind))] = fit;
  }
  // Link: duration of sends against their bytes.
  {
    std::vector<std::vector<double>> X;
    std::vector<double> y, waits;  // waits: each send's time beyond its bytes at its run's catalogue bandwidth
    std::set<int64_t> sizes;
    for (const MeasuredRuns& run : runs) {
      for (const auto& t : run.traces) {
        for (const auto& e : t.events) {
          if (!ir::IsSend(e.kind) || e.bytes <= 0) continue;
          X.push_back({static_cast<double>(e.bytes), 1.0});
          y.push_back(e.end_s - e.start_s);
          waits.push_back(y.back() - static_cast<double>(e.bytes) / run.config->cluster.link.bandwidth);
          sizes.insert(e.bytes);
        }
      }
    }
    if (sizes.size() >= 2) {
      const auto theta = Solve(X, y, 0, 0);
      if (theta[0] > 0) cal.bandwidth = 1 / theta[0];
      cal.latency_s = std::max(0.0, theta[1]);
    } else if (!waits.empty()) {  // one size: keep the catalogue bandwidth, fit the latency to the median
      std::sort(waits.begin(), waits.end());
      cal.latency_s = std::max(0.0, waits[waits.size() / 2]);
    }
  }
  // Optimizer step: its time grows with the device's parameters; the median
  // of time per parameter over the steps measured (a line through the origin:
  // the few devices' parameter counts are too alike to fit an intercept).
  {
    std::vector<double> ratios;
    for (const MeasuredRuns& run : runs) {
      std::vector<double> params(run.plan->schedule.num_devices, 0.0);
      for (const auto& cell : run.plan->partition.cells) params[cell.device] += cell.params;
      for (const auto& t : run.traces) {
        for (const auto& e : t.events) {
          if (e.kind == ir::OpKind::kStep && params[e.device] > 0) {
            ratios.push_back((e.end_s - e.start_s) / params[e.device]);
          }
        }
      }
    }
    if (!ratios.empty()) {
      std::sort(ratios.begin(), ratios.end());
      cal.step_seconds_per_param = ratios[ratios.size() / 2];
      cal.step_overhead_s = 0.0;
    }
  }
  return cal;
}

}  // namespace twinpipe::simulate
