// What a calibration was fitted on: the range (least, most) over its runs of
// each quantity the fitted coefficients may depend on (model size, GPUs,
// tensor-parallel degree, pipeline stages, micro-batch size, a generated
// transformer's sequence length and hidden size, and its GEMMs' dimensions
// as the device runs them), and the precisions seen; so that a prediction
// outside them can say it extrapolates (DESIGN.md section 5). A value at
// either end of a range is inside it.
//
//   Coverage fitted = CoverageOf({&run_a.config, &run_b.config});
//   Extrapolations(fitted, config);  // {"GPUs 512 outside the fitted 8..16"}, or {} inside
#pragma once

#include <array>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cost_models/config.h"

namespace twinpipe::cost {

enum class Quantity {
  kParameters,      // the model's (ModelParameters)
  kGpus,            // cluster.NumDevices()
  kTensorParallel,  // t
  kStages,          // K, pipeline devices
  kMicroBatch,      // samples per micro-batch
  kSeq,             // a generated transformer's tokens per sample
  kDModel,          // a generated transformer's hidden size
  kGemmM,           // a GEMM's m, n and k on one GPU, a micro-batch's
  kGemmN,           //   samples multiplied in (as KernelTime does)
  kGemmK,
};

// Each quantity's key in a calibration file, its name in a message, and
// whether every run has it (a coverage read from a file must give it).
struct QuantityNames {
  Quantity quantity;
  std::string_view key, label;
  bool every_run;
};
inline constexpr std::array<QuantityNames, 10> kQuantities{{
    {Quantity::kParameters, "parameters", "model parameters", true},
    {Quantity::kGpus, "gpus", "GPUs", true},
    {Quantity::kTensorParallel, "tensor_parallel", "tensor-parallel degree", true},
    {Quantity::kStages, "stages", "pipeline stages", true},
    {Quantity::kMicroBatch, "micro_batch", "micro-batch size", true},
    {Quantity::kSeq, "seq", "sequence length", false},
    {Quantity::kDModel, "d_model", "hidden size", false},
    {Quantity::kGemmM, "gemm_m", "GEMM dimension m", false},
    {Quantity::kGemmN, "gemm_n", "GEMM dimension n", false},
    {Quantity::kGemmK, "gemm_k", "GEMM dimension k", false},
}};

struct Range {
  double least = 0, most = 0;
  bool operator==(const Range&) const = default;
};

struct Coverage {
  // Only the quantities some run had: no kSeq or kDModel without a
  // generated transformer, no GEMM dimensions without a model costed as
  // its kernels.
  std::map<Quantity, Range> ranges;
  std::set<std::string> precisions;  // the models' dtypes by name ("bf16")
  bool operator==(const Coverage&) const = default;
};

// One config's own values (a GEMM dimension's range over its kernels), and
// the union of several configs' (a calibration's runs).
Coverage CoverageOf(const Config& config);
Coverage CoverageOf(const std::vector<const Config*>& configs);

// What a search over the config's parallelism shares among its candidates:
// the model's quantities (parameters, sequence length, hidden size,
// precision) and the GPUs searched; the candidates' tensor-parallel degree,
// stages, micro-batch size and hence GEMM shapes vary and are not in it.
Coverage ModelCoverage(const Config& config, int gpus);

// One line per quantity of `asked` outside `fitted`, in kQuantities' order,
// then the precision: "GPUs 512 outside the fitted 8..16", "largest GEMM
// dimension n 53248 outside the fitted 1024..8192", "sequence length 4096:
// the fitted runs have none", "precision fp8 not among the fitted bf16, fp16".
// Empty when `asked` lies inside.
std::vector<std::string> Extrapolations(const Coverage& fitted, const Coverage& asked);
// The config's: Extrapolations(fitted, CoverageOf(config)).
std::vector<std::string> Extrapolations(const Coverage& fitted, const Config& config);

}  // namespace twinpipe::cost
