#include "cost_models/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost_models/compute_model.h"
#include "ir/json_reader.h"
#include "ir/name_table.h"

namespace twinpipe::cost {

namespace {

double RooflineOpTime(const Config& c, int i, ir::OpKind kind, const Device& d, const CollectiveLinks& links) {
  Device no_launch = d;  // a layer costed as kernels has no single launch to subtract
  no_launch.launch_overhead_s = 0;
  no_launch.kernel_launch_s = 0;
  return LayerOpTime(c.model.layers[i], kind, no_launch, c.model.dtype, c.cluster.GemmEfficiency(d),
                     static_cast<double>(c.training.MicroBatchSize()), links);
}

}  // namespace

double RooflineOpTime(const Config& c, int i, ir::OpKind kind, const Device& d) {
  return RooflineOpTime(c, i, kind, d, LinksOf(c));
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
void ForEachCalibratedLayer(const Config& c, const CollectiveLinks& links, const OpFit* fit, int first, int last,
                            ir::OpKind kind, const Device& d, Visit&& visit) {
  ForEachLayerTime(
      c.model, first, last,
      [&](int i) {
        const Layer& layer = c.model.layers[i];
        if (!fit) {
          return LayerOpTime(layer, kind, d, c.model.dtype, c.cluster.GemmEfficiency(d),
                             static_cast<double>(c.training.MicroBatchSize()), links);
        }
        auto s = fit->scale.find(layer.kind);
        return (s != fit->scale.end() ? s->second : 1.0) * RooflineOpTime(c, i, kind, d, links);
      },
      visit);
}

}  // namespace

double CalibratedOpTime(const Config& c, const Calibration* cal, int first, int last, ir::OpKind kind,
                        const Device& d) {
  const OpFit* fit = FitFor(cal, kind);
  double t = 0;
  ForEachCalibratedLayer(c, LinksOf(c), fit, first, last, kind, d, [&](int, double layer_t) { t += layer_t; });
  return fit ? t + fit->Overhead(last - first + 1) : t;
}

CalibratedOpTimes::CalibratedOpTimes(const Config& c, const Calibration* cal, const Device& d) {
  const int L = static_cast<int>(c.model.layers.size());
  for (size_t k = 0; k < kKinds.size(); ++k) fits_[k] = FitFor(cal, kKinds[k]);
  layer_s_.resize(L);
  if (L == 0) return;
  const CollectiveLinks links = LinksOf(c);
  // One walk for every kind: the runs of layers that cost alike are found once.
  ForEachLayerTime(
      c.model, 0, L - 1,
      [&](int i) {
        std::array<double, kKinds.size()> t{};
        for (size_t k = 0; k < kKinds.size(); ++k) {
          ForEachCalibratedLayer(c, links, fits_[k], i, i, kKinds[k], d, [&](int, double s) { t[k] = s; });
        }
        return t;
      },
      [&](int i, const std::array<double, kKinds.size()>& t) { layer_s_[i] = t; });

  const bool any = std::any_of(c.model.layers.begin(), c.model.layers.end(), [](const cost::Layer& l) {
    return std::any_of(l.kernels.begin(), l.kernels.end(), [](const Kernel& k) {
      return k.collective != Kernel::Collective::kNone && k.over == Kernel::Over::kExpert;
    });
  });
  if (!any) return;
  all_to_all_s_.resize(L);
  const double samples = static_cast<double>(c.training.MicroBatchSize());
  ForEachLayerTime(
      c.model, 0, L - 1,
      [&](int i) {
        std::array<double, kKinds.size()> t{};
        for (size_t k = 0; k < kKinds.size(); ++k) {
          t[k] = LayerAllToAllTime(c.model.layers[i], kKinds[k], d, c.model.dtype, samples, links);
        }
        return t;
      },
      [&](int i, const std::array<double, kKinds.size()>& t) { all_to_all_s_[i] = t; });
}

double CalibratedOpTimes::AllToAllCell(ir::OpKind kind, int first, int last) const {
  if (all_to_all_s_.empty()) return 0;
  const size_t k = Slot(kind);
  double t = 0;
  for (int i = first; i <= last; ++i) t += all_to_all_s_[i][k];
  return t;
}

size_t CalibratedOpTimes::Slot(ir::OpKind kind) {
  return static_cast<size_t>(std::find(kKinds.begin(), kKinds.end(), kind) - kKinds.begin());
}

double CalibratedOpTimes::Cell(ir::OpKind kind, int first, int last) const {
  const size_t k = Slot(kind);
  double t = 0;
  for (int i = first; i <= last; ++i) t += layer_s_[i][k];
  return fits_[k] ? t + fits_[k]->Overhead(last - first + 1) : t;
}

namespace {

// {"parameters": [least, most], ..., "precisions": ["bf16"]}: the ranges in
// kQuantities' order, whole numbers as integers.
nlohmann::ordered_json CoverageJson(const Coverage& coverage) {
  auto number = [](double v) {
    return v == std::trunc(v) && std::abs(v) < 0x1p53 ? nlohmann::ordered_json(static_cast<int64_t>(v))
                                                      : nlohmann::ordered_json(v);
  };
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const QuantityNames& q : kQuantities) {
    auto r = coverage.ranges.find(q.quantity);
    if (r != coverage.ranges.end()) j[std::string(q.key)] = {number(r->second.least), number(r->second.most)};
  }
  j["precisions"] = coverage.precisions;
  return j;
}

// The "coverage" object at /coverage: each range [least, most], two numbers
// >= 0 in order, and those every run has present; precisions by name.
Coverage ReadCoverage(const ir::json::Reader& r, const ir::json::Json& j) {
  const std::string path = "/coverage";
  std::vector<std::string_view> keys{"precisions"};
  for (const QuantityNames& q : kQuantities) keys.push_back(q.key);
  r.Keys(j, path, keys);
  Coverage coverage;
  for (const QuantityNames& q : kQuantities) {
    const std::string key(q.key);
    if (!j.contains(key)) {
      if (q.every_run) r.Fail(path, fmt::format("missing key '{}' (an array [least, most])", key));
      continue;
    }
    const ir::json::Json& range = r.Array(j, key, path);
    const std::string at = path + "/" + key;
    if (range.size() != 2) r.Fail(at, fmt::format("expected [least, most], got {}", range.dump()));
    const double least = r.NumberAt(range, 0, at, 0, std::numeric_limits<double>::max());
    const double most = r.NumberAt(range, 1, at, 0, std::numeric_limits<double>::max());
    if (least > most) r.Fail(at, fmt::format("expected [least, most] with least <= most, got {}", range.dump()));
    coverage.ranges[q.quantity] = Range{least, most};
  }
  const ir::json::Json& precisions = r.Array(j, "precisions", path);
  for (size_t i = 0; i < precisions.size(); ++i) {
    const ir::json::Json& p = precisions[i];
    if (!p.is_string() || !DtypeFromName(p.get<std::string>())) {
      r.Fail(fmt::format("{}/precisions/{}", path, i),
             fmt::format("expected a precision (fp32, tf32, fp16, bf16, fp8), got {}", p.dump()));
    }
    coverage.precisions.insert(p.get<std::string>());
  }
  return coverage;
}

}  // namespace

namespace {

constexpr ir::NameTable<CoefficientFit::Status, 4> kStatusNames{{{"fitted", CoefficientFit::Status::kFitted},
                                                                  {"at lower bound", CoefficientFit::Status::kAtLowerBound},
                                                                  {"at upper bound", CoefficientFit::Status::kAtUpperBound},
                                                                  {"held", CoefficientFit::Status::kHeld}}};

}  // namespace

std::string_view StatusName(CoefficientFit::Status status) { return ir::NameOf(kStatusNames, status); }

// The physical ranges `calibrate --runs` holds a profile's coefficients to.
// A fit that ends at an end of one says so: the runs ask for something the
// model lacks, and the coefficient is no longer the quantity it names.
const std::array<CoefficientRange, kProfileCoefficients.size()>& ProfileRanges(const Device& device) {
  static const std::array<CoefficientRange, kProfileCoefficients.size()> gpu{{
      // Large cuBLAS GEMMs of random operands reach 0.66 (H100 PCIe) to 0.87
      // (A100 SXM) of the dense tensor-core peak (catalogue.cc's sources);
      // 0.95 only on all-zero data, which draws less power (H. He 2024). A
      // P100's fp32 GEMMs are taken at 0.5 of its peak.
      {kProfileCoefficients[0], 0.4, 0.92,
       "large cuBLAS GEMMs reach 0.66 (H100 PCIe) to 0.87 (A100 SXM) of the dense peak on random data"},
      // Copy and saxpy reach 0.84 and 0.82 of an A100's HBM bandwidth
      // (GPUInspector.jl's A100-SXM4-40GB figures); STREAM-class kernels 0.8
      // to 0.9 on HBM GPUs.
      {kProfileCoefficients[1], 0.6, 0.92, "streaming kernels reach 0.8 to 0.9 of an HBM GPU's bandwidth"},
      // Host time per framework op, beyond its kernel launch: about 1 to 2 us
      // for a bare PyTorch op (pytorch/pytorch issue 41383), 20 us from the
      // call to the kernel's start for one PyTorch op (NVIDIA, "Understanding
      // the Visualization of Overhead and Latency in Nsight Systems"), 37 us
      // through a Python wrapper layer (FlagGems issue 4812).
      {kProfileCoefficients[2], 1e-6, 50e-6, "a framework op costs its host 1 to about 40 us"},
      // GPU time per framework op beyond its work: back-to-back kernels leave
      // the GPU idle 0.5 us (a CUDA graph) to 0.9 us (stream launches) on a
      // V100 (NVIDIA, "Getting Started with CUDA Graphs") and 1.3 us on an
      // H100 (Hazy Research, "Look Ma, No Bubbles!", 2025); an op's small
      // side kernel adds a few us.
      {kProfileCoefficients[3], 0.5e-6, 5e-6, "between kernels a GPU idles 0.5 to 1.3 us, a small side kernel a few us"},
      // Host time of one kernel launch through the CUDA driver: a stream
      // takes a kernel every 3.8 us at best on a V100 (NVIDIA, "Getting
      // Started with CUDA Graphs"); a direct cuLaunchKernel takes a 24 us
      // kernel to 28.3 us on a B200 ("Four counter-intuitive lessons from
      // deep-diving GPU kernel dispatch overhead", 2026); older drivers and
      // busy hosts up to about 10 us.
      {kProfileCoefficients[4], 1e-6, 10e-6, "a kernel launch costs the host 1 to about 10 us"},
  }};
  static const std::array<CoefficientRange, kProfileCoefficients.size()> other{{
      {kProfileCoefficients[0], 0.01, 1, "no published range for this device"},
      {kProfileCoefficients[1], 0.01, 1, "no published range for this device"},
      {kProfileCoefficients[2], 0, 1e-3, "no published range for this device"},
      {kProfileCoefficients[3], 0, 1e-3, "no published range for this device"},
      {kProfileCoefficients[4], 0, 1e-3, "no published range for this device"},
  }};
  return device.sm_count > 0 ? gpu : other;
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
    if (fit.overhead_per_layer_s > 0) f["overhead_per_layer_s"] = fit.overhead_per_layer_s;
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
    j["profile"]["kernel_launch_s"] = cal.profile->kernel_launch_s;
    j["profile"]["runs"] = cal.profile->runs;
    if (cal.profile->drift) j["profile"]["drift"] = *cal.profile->drift;
    if (cal.profile->overlap_interference) {
      j["profile"]["overlap_interference"] = *cal.profile->overlap_interference;
    }
    for (size_t i = 0; i < cal.profile->coefficients.size() && i < kProfileCoefficients.size(); ++i) {
      const CoefficientFit& c = cal.profile->coefficients[i];
      nlohmann::ordered_json f;
      f["value"] = c.value;
      f["range"] = {c.low, c.high};
      f["status"] = StatusName(c.status);
      f["sensitivity"] = c.sensitivity;
      if (c.std_error) f["std_error"] = *c.std_error;
      if (!c.note.empty()) f["note"] = c.note;
      for (const CoefficientFit::Pull& pull : c.pulled_by) {
        f["pulled_by"].push_back(nlohmann::ordered_json{{"line", pull.line}, {"share", pull.share}});
      }
      j["profile"]["coefficients"][std::string(kProfileCoefficients[i])] = f;
    }
    if (!cal.profile->warnings.empty()) j["profile"]["warnings"] = cal.profile->warnings;
  }
  if (cal.coverage) j["coverage"] = CoverageJson(*cal.coverage);
  return j.dump(2) + "\n";
}

Result<Calibration> ReadCalibration(std::string_view text, std::string_view source) {
  using ir::json::Json;
  return ir::json::TryRead([&] {
    const ir::json::Reader r{std::string(source)};
    const Json j = r.Parse(text);
    r.Format(j, "twinpipe-calibration");
    r.Keys(j, "", {"format", "version", "device", "commit", "command", "compute", "link", "step", "profile",
                   "coverage"});
    r.Int(j, "version", "", 1, 1, 1);  // the only version written so far
    Calibration cal;
    cal.device = r.String(j, "device", "", {}, "");
    cal.commit = r.String(j, "commit", "", {}, "");
    cal.command = r.String(j, "command", "", {}, "");
    constexpr double kMost = std::numeric_limits<double>::max();  // what a fit may write
    if (j.contains("compute")) {
      const Json& compute = r.Object(j, "compute", "");
      for (auto it = compute.begin(); it != compute.end(); ++it) {
        const std::string path = "/compute/" + it.key();
        if (!ir::OpKindFromName(it.key())) r.Fail(path, "expected an op kind (F, B, I, W, R)");
        const Json& f = r.Object(compute, it.key(), "/compute");
        r.Keys(f, path, {"overhead_s", "overhead_per_layer_s", "scale", "samples"});
        OpFit fit;
        fit.overhead_s = r.Number(f, "overhead_s", path, 0, kMost);
        fit.overhead_per_layer_s = r.Number(f, "overhead_per_layer_s", path, 0, kMost, 0.0);
        const Json& scale = r.Object(f, "scale", path);
        for (auto layer = scale.begin(); layer != scale.end(); ++layer) {
          fit.scale[layer.key()] = r.Number(scale, layer.key(), path + "/scale", 0, kMost);
        }
        fit.samples = static_cast<int>(r.Int(f, "samples", path, 0, std::numeric_limits<int>::max(), 0));
        cal.compute[it.key()] = fit;
      }
    }
    if (j.contains("link")) {
      const Json& link = r.Object(j, "link", "");
      r.Keys(link, "/link", {"latency_s", "bandwidth"});
      if (link.contains("latency_s")) cal.latency_s = r.Number(link, "latency_s", "/link", 0, kMost);
      if (link.contains("bandwidth")) cal.bandwidth = r.Number(link, "bandwidth", "/link", 0, kMost, {}, true);
    }
    if (j.contains("step")) {
      const Json& step = r.Object(j, "step", "");
      r.Keys(step, "/step", {"overhead_s", "seconds_per_param"});
      if (step.contains("overhead_s")) cal.step_overhead_s = r.Number(step, "overhead_s", "/step", 0, kMost);
      if (step.contains("seconds_per_param")) {
        cal.step_seconds_per_param = r.Number(step, "seconds_per_param", "/step", 0, kMost);
      }
    }
    if (j.contains("profile")) {
      const Json& p = r.Object(j, "profile", "");
      r.Keys(p, "/profile", {"gemm_efficiency", "bandwidth_efficiency", "launch_overhead_s", "kernel_floor_s",
                             "kernel_launch_s", "runs", "drift", "overlap_interference", "coefficients",
                             "warnings"});
      ProfileFit fit;
      fit.gemm_efficiency = r.Number(p, "gemm_efficiency", "/profile", 0, 1, {}, true);
      fit.bandwidth_efficiency = r.Number(p, "bandwidth_efficiency", "/profile", 0, 1, {}, true);
      fit.launch_overhead_s = r.Number(p, "launch_overhead_s", "/profile", 0, 1, {}, true);
      // Calibrations written before the kernel floor was fitted have none.
      fit.kernel_floor_s = r.Number(p, "kernel_floor_s", "/profile", 0, 1, 0.0);
      // Those written before the kernel launch was fitted apart include it in
      // launch_overhead_s.
      fit.kernel_launch_s = r.Number(p, "kernel_launch_s", "/profile", 0, 1, 0.0);
      fit.runs = static_cast<int>(r.Int(p, "runs", "/profile", 0, std::numeric_limits<int>::max(), 0));
      // Those written before the drift was recorded predict with the catalogue's.
      if (p.contains("drift")) fit.drift = r.Number(p, "drift", "/profile", 0, 1);
      if (p.contains("overlap_interference")) {
        fit.overlap_interference = r.Number(p, "overlap_interference", "/profile", 0, 1);
      }
      if (p.contains("coefficients")) {
        const Json& cs = r.Object(p, "coefficients", "/profile");
        r.Keys(cs, "/profile/coefficients", kProfileCoefficients);
        for (const std::string_view name : kProfileCoefficients) {
          // Files written before the kernel launch was fitted apart report four.
          if (name == kProfileCoefficients.back() && !cs.contains(std::string(name))) break;
          const std::string path = "/profile/coefficients/" + std::string(name);
          const Json& c = r.Object(cs, std::string(name), "/profile/coefficients");
          r.Keys(c, path, {"value", "range", "status", "sensitivity", "std_error", "note", "pulled_by"});
          CoefficientFit f;
          f.value = r.Number(c, "value", path, 0, 1);
          const Json& range = r.Array(c, "range", path);
          if (range.size() != 2) r.Fail(path + "/range", fmt::format("expected [low, high], got {}", range.dump()));
          f.low = r.NumberAt(range, 0, path + "/range", 0, 1);
          f.high = r.NumberAt(range, 1, path + "/range", 0, 1);
          if (!(f.low <= f.value && f.value <= f.high)) {
            r.Fail(path, fmt::format("value {} outside its range [{}, {}]", f.value, f.low, f.high));
          }
          const std::string status = r.String(c, "status", path, {}, std::nullopt);
          const auto parsed = ir::FromName(kStatusNames, status);
          if (!parsed) {
            r.Fail(path + "/status",
                   fmt::format("'{}' is not one of fitted, at lower bound, at upper bound, held", status));
          }
          f.status = *parsed;
          f.sensitivity = r.Number(c, "sensitivity", path, 0, kMost, 0.0);
          if (c.contains("std_error")) f.std_error = r.Number(c, "std_error", path, 0, kMost);
          f.note = r.String(c, "note", path, {}, "");
          // Files written before the pulls were recorded have none.
          if (c.contains("pulled_by")) {
            const Json& pulls = r.Array(c, "pulled_by", path);
            for (size_t k = 0; k < pulls.size(); ++k) {
              const std::string at = fmt::format("{}/pulled_by/{}", path, k);
              if (!pulls[k].is_object()) r.Fail(at, "expected {\"line\": n, \"share\": s}");
              r.Keys(pulls[k], at, {"line", "share"});
              f.pulled_by.push_back(
                  {.line = static_cast<int>(r.Int(pulls[k], "line", at, 1, std::numeric_limits<int>::max())),
                   .share = r.Number(pulls[k], "share", at, -1, 1)});
            }
          }
          fit.coefficients.push_back(f);
        }
      }
      if (p.contains("warnings")) {
        const auto w = p.find("warnings");
        if (!w->is_array()) r.Fail("/profile/warnings", "expected an array of strings");
        for (size_t i = 0; i < w->size(); ++i) {
          if (!(*w)[i].is_string()) r.Fail(fmt::format("/profile/warnings/{}", i), "expected a string");
          fit.warnings.push_back((*w)[i].get<std::string>());
        }
      }
      cal.profile = fit;
    }
    // Calibrations written before the coverage was recorded have none.
    if (j.contains("coverage")) cal.coverage = ReadCoverage(r, r.Object(j, "coverage", ""));
    // Fitted figures are a device kind's: a file without its kind would
    // apply them to any device.
    if (cal.device.empty() && (!cal.compute.empty() || cal.profile)) {
      r.Fail("/device", "missing or empty: the device kind the fits were measured on (as the catalogue names it, "
                        "e.g. \"H100-SXM\"), which every file `twinpipe calibrate` writes records");
    }
    return cal;
  });
}

Config WithProfile(const Config& config, const Calibration& cal) {
  Config c = config;
  if (!cal.profile) return c;
  for (auto& d : c.cluster.devices) {
    if (!cal.device.empty() && d.name != cal.device) continue;
    for (const ProfileMember& m : kProfileMembers) d.*m.device = (*cal.profile).*m.fit;
    if (cal.profile->drift) d.drift = *cal.profile->drift;
    if (cal.profile->overlap_interference) d.overlap_interference = *cal.profile->overlap_interference;
  }
  return c;
}

}  // namespace twinpipe::cost
