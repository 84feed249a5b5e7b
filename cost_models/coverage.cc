#include "cost_models/coverage.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace twinpipe::cost {
namespace {

void Widen(Coverage& c, Quantity q, double value) {
  auto [it, fresh] = c.ranges.try_emplace(q, Range{value, value});
  if (fresh) return;
  it->second.least = std::min(it->second.least, value);
  it->second.most = std::max(it->second.most, value);
}

// How a message shows a quantity's values: a parameter count in billions
// (B) or millions (M) after the largest of them; another quantity as the
// whole number it is.
struct Unit {
  double scale = 1;
  std::string_view suffix;
};

Unit UnitOf(Quantity q, double largest) {
  if (q != Quantity::kParameters) return {};
  return largest >= 1e9 ? Unit{1e9, "B"} : largest >= 1e6 ? Unit{1e6, "M"} : Unit{};
}

std::string Text(double value, int digits, Unit unit) {
  if (unit.scale == 1 && value == std::trunc(value) && std::abs(value) < 1e15) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{:.{}g}{}", value / unit.scale, digits, unit.suffix);
}

// "<what> <value> outside the fitted <least>..<most>", with enough digits
// that the value and the end it passes read apart.
std::string Outside(Quantity q, std::string_view what, double value, const Range& fitted, double end) {
  const Unit unit = UnitOf(q, std::max(value, fitted.most));
  int digits = 4;
  while (digits < 17 && Text(value, digits, unit) == Text(end, digits, unit)) ++digits;
  return fmt::format("{} {} outside the fitted {}..{}", what, Text(value, digits, unit),
                     Text(fitted.least, digits, unit), Text(fitted.most, digits, unit));
}

}  // namespace

Coverage CoverageOf(const Config& c) {
  Coverage cov;
  const double samples = static_cast<double>(c.training.MicroBatchSize());
  Widen(cov, Quantity::kParameters, ModelParameters(c));
  Widen(cov, Quantity::kGpus, c.cluster.NumDevices());
  Widen(cov, Quantity::kTensorParallel, c.pipeline.tensor_parallel);
  Widen(cov, Quantity::kStages, c.pipeline.stages);
  Widen(cov, Quantity::kMicroBatch, samples);
  if (c.transformer) {
    Widen(cov, Quantity::kSeq, c.transformer->seq);
    Widen(cov, Quantity::kDModel, c.transformer->d_model);
  }
  const Kernels* previous = nullptr;  // a model's identical blocks share their kernels: looked at once
  for (const Layer& layer : c.model.layers) {
    if (previous && layer.kernels.SharedWith(*previous)) continue;
    previous = &layer.kernels;
    for (const Kernel& kn : layer.kernels) {
      if (!kn.gemm || kn.collective != Kernel::Collective::kNone || !RunsFor(kn, samples)) continue;
      const GemmShape s = ShapeFor(kn, samples);
      Widen(cov, Quantity::kGemmM, s.m);
      Widen(cov, Quantity::kGemmN, s.n);
      Widen(cov, Quantity::kGemmK, s.k);
    }
  }
  cov.precisions.emplace(DtypeName(c.model.dtype));
  return cov;
}

Coverage CoverageOf(const std::vector<const Config*>& configs) {
  Coverage all;
  for (const Config* c : configs) {
    const Coverage one = CoverageOf(*c);
    for (const auto& [q, r] : one.ranges) {
      Widen(all, q, r.least);
      Widen(all, q, r.most);
    }
    all.precisions.insert(one.precisions.begin(), one.precisions.end());
  }
  return all;
}

Coverage ModelCoverage(const Config& config, int gpus) {
  Coverage model = CoverageOf(config);
  std::erase_if(model.ranges, [](const auto& entry) {
    const Quantity q = entry.first;
    return q != Quantity::kParameters && q != Quantity::kSeq && q != Quantity::kDModel;
  });
  model.ranges[Quantity::kGpus] = Range{static_cast<double>(gpus), static_cast<double>(gpus)};
  return model;
}

std::vector<std::string> Extrapolations(const Coverage& fitted, const Coverage& asked) {
  std::vector<std::string> lines;
  for (const QuantityNames& names : kQuantities) {
    const Quantity q = names.quantity;
    auto a = asked.ranges.find(q);
    if (a == asked.ranges.end()) continue;
    const Range& v = a->second;
    const bool one = v.least == v.most;  // a config's own GEMMs span a range; its other quantities are one value
    auto f = fitted.ranges.find(q);
    if (f == fitted.ranges.end()) {
      const Unit unit = UnitOf(q, v.most);
      lines.push_back(fmt::format("{} {}{}: the fitted runs have none", names.label, Text(v.least, 4, unit),
                                  one ? "" : ".." + Text(v.most, 4, unit)));
      continue;
    }
    const Range& r = f->second;
    const std::string label(names.label);
    if (v.least < r.least) lines.push_back(Outside(q, one ? label : "smallest " + label, v.least, r, r.least));
    if (v.most > r.most) lines.push_back(Outside(q, one ? label : "largest " + label, v.most, r, r.most));
  }
  for (const std::string& p : asked.precisions) {
    if (fitted.precisions.contains(p)) continue;
    lines.push_back(fmt::format("precision {} not among the fitted {}", p,
                                fitted.precisions.empty() ? std::string("(none)")
                                                            : fmt::format("{}", fmt::join(fitted.precisions, ", "))));
  }
  return lines;
}

std::vector<std::string> Extrapolations(const Coverage& fitted, const Config& config) {
  return Extrapolations(fitted, CoverageOf(config));
}

}  // namespace twinpipe::cost
