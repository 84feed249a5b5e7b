#include "simulate/calibration.h"

#include <cmath>
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost_models/compute_model.h"

namespace twinpipe::simulate {
namespace {

// Predicted roofline time of one micro-batch of layer i, without the launch
// overhead (which the fit's own overhead replaces).
double Roofline(const cost::Config& c, int i, ir::OpKind kind, const cost::Device& d) {
  cost::Device no_launch = d;  // a layer costed as kernels has no single launch to subtract
  no_launch.launch_overhead_s = 0;
  return cost::LayerOpTime(c.model.layers[i], kind, no_launch, c.model.dtype, c.cluster.GemmEfficiency(d),
                           static_cast<double>(c.training.MicroBatchSize()), &c.cluster.link);
}

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

namespace {

// The calibration's fit for an op kind, if any (R without samples of its
// own takes F's).
const OpFit* FitOf(const Calibration* cal, ir::OpKind kind) {
  if (!cal) return nullptr;
  auto it = cal->compute.find(std::string(ir::OpKindName(kind)));
  if (it == cal->compute.end() && kind == ir::OpKind::kRecompute) it = cal->compute.find("F");
  return it != cal->compute.end() ? &it->second : nullptr;
}

// Calls visit(i, seconds) for each layer of [first, last].
template <typename Visit>
void ForEachCalibratedLayer(const cost::Config& c, const OpFit* fit, int first, int last, ir::OpKind kind,
                            const cost::Device& d, Visit&& visit) {
  cost::ForEachLayerTime(
      c.model, first, last,
      [&](int i) {
        const cost::Layer& layer = c.model.layers[i];
        if (!fit) {
          return cost::LayerOpTime(layer, kind, d, c.model.dtype, c.cluster.GemmEfficiency(d),
                                   static_cast<double>(c.training.MicroBatchSize()), &c.cluster.link);
        }
        auto s = fit->scale.find(layer.kind);
        return (s != fit->scale.end() ? s->second : 1.0) * Roofline(c, i, kind, d);
      },
      visit);
}

}  // namespace

double CalibratedOpTime(const cost::Config& c, const Calibration* cal, int first, int last, ir::OpKind kind,
                        const cost::Device& d) {
  const OpFit* fit = FitOf(cal, kind);
  double t = 0;
  ForEachCalibratedLayer(c, fit, first, last, kind, d, [&](int, double layer_t) { t += layer_t; });
  return fit ? t + fit->overhead_s : t;
}

CalibratedOpTimes::CalibratedOpTimes(const cost::Config& c, const Calibration* cal, const cost::Device& d) {
  const int L = static_cast<int>(c.model.layers.size());
  for (size_t k = 0; k < kKinds.size(); ++k) fits_[k] = FitOf(cal, kKinds[k]);
  layer_s_.resize(L);
  if (L == 0) return;
  // One walk for every kind: the runs of layers that cost alike are found once.
  cost::ForEachLayerTime(
      c.model, 0, L - 1,
      [&](int i) {
        std::array<double, kKinds.size()> t{};
        for (size_t k = 0; k < kKinds.size(); ++k) {
          ForEachCalibratedLayer(c, fits_[k], i, i, kKinds[k], d, [&](int, double s) { t[k] = s; });
        }
        return t;
      },
      [&](int i, const std::array<double, kKinds.size()>& t) { layer_s_[i] = t; });
}

double CalibratedOpTimes::Cell(ir::OpKind kind, int first, int last) const {
  const size_t k = static_cast<size_t>(std::find(kKinds.begin(), kKinds.end(), kind) - kKinds.begin());
  double t = 0;
  for (int i = first; i <= last; ++i) t += layer_s_[i][k];
  return fits_[k] ? t + fits_[k]->overhead_s : t;
}

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
          row[j] += Roofline(c, i, kind, dev);
        }
        row.back() = 1;
        for (size_t k = 0; k < d.size(); ++k) {
          X.push_back(row);
          y.push_back(median);
        }
      }
    }
    if (X.empty()) continue;
    // Scales are pulled towards the mean measured/predicted ratio.
    double measured_sum = 0, predicted_sum = 0;
    for (size_t r = 0; r < X.size(); ++r) {
      measured_sum += y[r];
      for (size_t j = 0; j < kinds.size(); ++j) predicted_sum += X[r][j];
    }
    const double prior = predicted_sum > 0 ? measured_sum / predicted_sum : 1;
    const auto theta = Solve(X, y, kinds.size(), prior);
    OpFit fit;
    fit.samples = static_cast<int>(X.size());
    for (size_t j = 0; j < kinds.size(); ++j) fit.scale[kinds[j]] = std::max(0.0, theta[j]);
    fit.overhead_s = std::max(0.0, theta.back());
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

std::string WriteCalibration(const Calibration& cal) {
  nlohmann::ordered_json j;
  j["format"] = "twinpipe-calibration";
  j["version"] = 1;
  j["device"] = cal.device;
  j["commit"] = cal.commit;
  j["command"] = cal.command;
  j["compute"] = nlohmann::ordered_json::object();
  for (const auto& [kind, fit] : cal.compute) {
    nlohmann::ordered_json f;
    f["overhead_s"] = fit.overhead_s;
    f["scale"] = nlohmann::ordered_json::object();
    for (const auto& [layer, scale] : fit.scale) f["scale"][layer] = scale;
    f["samples"] = fit.samples;
    j["compute"][kind] = f;
  }
  if (cal.latency_s) j["link"]["latency_s"] = *cal.latency_s;
  if (cal.bandwidth) j["link"]["bandwidth"] = *cal.bandwidth;
  if (cal.step_overhead_s) j["step"]["overhead_s"] = *cal.step_overhead_s;
  if (cal.step_seconds_per_param) j["step"]["seconds_per_param"] = *cal.step_seconds_per_param;
  if (cal.profile) {
    j["profile"]["gemm_efficiency"] = cal.profile->gemm_efficiency;
    j["profile"]["bandwidth_efficiency"] = cal.profile->bandwidth_efficiency;
    j["profile"]["launch_overhead_s"] = cal.profile->launch_overhead_s;
    j["profile"]["kernel_floor_s"] = cal.profile->kernel_floor_s;
    j["profile"]["runs"] = cal.profile->runs;
  }
  return j.dump(2) + "\n";
}

Result<Calibration> ReadCalibration(std::string_view text, std::string_view source) {
  using nlohmann::json;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Fail(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (!j.is_object() || !j.contains("format") || j["format"] != "twinpipe-calibration") {
    return Fail(fmt::format("{}: /format: expected \"twinpipe-calibration\"", source));
  }
  Calibration cal;
  try {
    cal.device = j.value("device", "");
    cal.commit = j.value("commit", "");
    cal.command = j.value("command", "");
    if (j.contains("compute")) {
      for (auto it = j["compute"].begin(); it != j["compute"].end(); ++it) {
        if (!ir::OpKindFromName(it.key())) {
          return Fail(fmt::format("{}: /compute/{}: expected an op kind (F, B, I, W, R)", source, it.key()));
        }
        OpFit fit;
        fit.overhead_s = it->at("overhead_s").get<double>();
        for (auto s = it->at("scale").begin(); s != it->at("scale").end(); ++s) fit.scale[s.key()] = s->get<double>();
        if (it->contains("samples")) {
          const auto& n = it->at("samples");
          if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > (int64_t{1} << 40)) {
            return Fail(fmt::format("{}: /compute/{}/samples: expected a count, got {}", source, it.key(), n.dump()));
          }
          fit.samples = static_cast<decltype(fit.samples)>(n.get<int64_t>());
        }
        if (fit.overhead_s < 0) return Fail(fmt::format("{}: /compute/{}/overhead_s: expected >= 0", source, it.key()));
        cal.compute[it.key()] = fit;
      }
    }
    if (j.contains("link")) {
      if (j["link"].contains("latency_s")) cal.latency_s = j["link"]["latency_s"].get<double>();
      if (j["link"].contains("bandwidth")) cal.bandwidth = j["link"]["bandwidth"].get<double>();
      if (cal.bandwidth && !(*cal.bandwidth > 0)) return Fail(fmt::format("{}: /link/bandwidth: expected > 0", source));
    }
    if (j.contains("step")) {
      if (j["step"].contains("overhead_s")) cal.step_overhead_s = j["step"]["overhead_s"].get<double>();
      if (j["step"].contains("seconds_per_param")) cal.step_seconds_per_param = j["step"]["seconds_per_param"].get<double>();
    }
    if (j.contains("profile")) {
      const json& p = j["profile"];
      ProfileFit fit;
      // A number in (0, hi], or with `zero` in [0, hi]; one that may be absent keeps dst.
      auto number = [&](const char* key, double& dst, double hi, bool zero, bool required) -> Result<void> {
        if (!required && p.is_object() && !p.contains(key)) return {};
        if (!p.is_object() || !p.contains(key) || !p[key].is_number() ||
            !(zero ? p[key].get<double>() >= 0 : p[key].get<double>() > 0) || p[key].get<double>() > hi) {
          return Fail(fmt::format("{}: /profile/{}: expected a number {} 0 and at most {}", source, key,
                                  zero ? ">=" : ">", hi));
        }
        dst = p[key].get<double>();
        return {};
      };
      // Calibrations written before the kernel floor was fitted have none.
      for (auto ok : {number("gemm_efficiency", fit.gemm_efficiency, 1, false, true),
                      number("bandwidth_efficiency", fit.bandwidth_efficiency, 1, false, true),
                      number("launch_overhead_s", fit.launch_overhead_s, 1, false, true),
                      number("kernel_floor_s", fit.kernel_floor_s, 1, true, false)}) {
        if (!ok) return tl::unexpected(ok.error());
      }
      if (p.contains("runs") && p["runs"].is_number_integer()) fit.runs = static_cast<int>(p["runs"].get<int64_t>());
      cal.profile = fit;
    }
  } catch (const json::exception& e) {
    return Fail(fmt::format("{}: {}", source, e.what()));
  }
  return cal;
}

cost::Config WithProfile(const cost::Config& config, const Calibration& cal) {
  cost::Config c = config;
  if (!cal.profile) return c;
  for (auto& d : c.cluster.devices) {
    if (!cal.device.empty() && d.name != cal.device) continue;
    d.gemm_efficiency = cal.profile->gemm_efficiency;
    d.bandwidth_efficiency = cal.profile->bandwidth_efficiency;
    d.launch_overhead_s = cal.profile->launch_overhead_s;
    d.kernel_floor_s = cal.profile->kernel_floor_s;
  }
  return c;
}

}  // namespace twinpipe::simulate
