#include "cost_models/calibration.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost_models/compute_model.h"

namespace twinpipe::cost {

double RooflineOpTime(const Config& c, int i, ir::OpKind kind, const Device& d) {
  Device no_launch = d;  // a layer costed as kernels has no single launch to subtract
  no_launch.launch_overhead_s = 0;
  return LayerOpTime(c.model.layers[i], kind, no_launch, c.model.dtype, c.cluster.GemmEfficiency(d),
                     static_cast<double>(c.training.MicroBatchSize()), &c.cluster.link);
}

const OpFit* FitFor(const Calibration* cal, ir::OpKind kind) {
  if (!cal) return nullptr;
  auto it = cal->compute.find(std::string(ir::OpKindName(kind)));
  if (it == cal->compute.end() && kind == ir::OpKind::kRecompute) it = cal->compute.find("F");
  return it != cal->compute.end() ? &it->second : nullptr;
}

namespace {

// Calls visit(i, seconds) for each layer of [first, last].
template <typename Visit>
void ForEachCalibratedLayer(const Config& c, const OpFit* fit, int first, int last, ir::OpKind kind, const Device& d, Visit&& visit) {
  ForEachLayerTime(
      c.model, first, last,
      [&](int i) {
        const Layer& layer = c.model.layers[i];
        if (!fit) {
          return LayerOpTime(layer, kind, d, c.model.dtype, c.cluster.GemmEfficiency(d),
                             static_cast<double>(c.training.MicroBatchSize()), &c.cluster.link);
        }
        auto s = fit->scale.find(layer.kind);
        return (s != fit->scale.end() ? s->second : 1.0) * RooflineOpTime(c, i, kind, d);
      },
      visit);
}

}  // namespace

double CalibratedOpTime(const Config& c, const Calibration* cal, int first, int last, ir::OpKind kind, const Device& d) {
  const OpFit* fit = FitFor(cal, kind);
  double t = 0;
  ForEachCalibratedLayer(c, fit, first, last, kind, d, [&](int, double layer_t) { t += layer_t; });
  return fit ? t + fit->overhead_s : t;
}

CalibratedOpTimes::CalibratedOpTimes(const Config& c, const Calibration* cal, const Device& d) {
  const int L = static_cast<int>(c.model.layers.size());
  for (size_t k = 0; k < kKinds.size(); ++k) fits_[k] = FitFor(cal, kKinds[k]);
  layer_s_.resize(L);
  if (L == 0) return;
  // One walk for every kind: the runs of layers that cost alike are found once.
  ForEachLayerTime(
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

size_t CalibratedOpTimes::Slot(ir::OpKind kind) {
  return static_cast<size_t>(std::find(kKinds.begin(), kKinds.end(), kind) - kKinds.begin());
}

double CalibratedOpTimes::Cell(ir::OpKind kind, int first, int last) const {
  const size_t k = Slot(kind);
  double t = 0;
  for (int i = first; i <= last; ++i) t += layer_s_[i][k];
  return fits_[k] ? t + fits_[k]->overhead_s : t;
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

Config WithProfile(const Config& config, const Calibration& cal) {
  Config c = config;
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

}  // namespace twinpipe::cost
