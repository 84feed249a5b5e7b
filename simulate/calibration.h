// Calibration: cost-model coefficients fitted to measured traces, and their
// file. Per op kind (F, B, I, W, R): a scale on each layer kind's predicted
// roofline time plus a fixed overhead per op; the link's latency and
// bandwidth from its transfers; the optimizer step's overhead and time per
// parameter. `simulate --calibration FILE` uses them in place of catalogue
// figures.
//
//   Result<Calibration> cal = FitCalibration(config, plan, {measured});
//   std::string json = WriteCalibration(*cal);
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost_models/config.h"
#include "ir/result.h"
#include "cost_models/plan.h"
#include "traces/trace.h"

namespace twinpipe::simulate {

struct OpFit {
  double overhead_s = 0;                        // per op
  std::map<std::string, double> scale;          // per layer kind: x predicted roofline time
  int samples = 0;
};

// A device profile's coefficients fitted to a table of runs' iteration
// times (`calibrate --runs`, simulate/runs.h): they replace the catalogue's
// figures for every device of the calibrated kind.
struct ProfileFit {
  double gemm_efficiency = 0;       // achievable fraction of GEMM peak
  double bandwidth_efficiency = 0;  // achievable fraction of memory bandwidth
  double launch_overhead_s = 0;     // host time per framework op
  double kernel_floor_s = 0;        // GPU time per framework op beyond its bytes and FLOPs
  int runs = 0;                     // fitted on
};

struct Calibration {
  std::string device;    // the device kind measured
  std::string commit;    // of twinpipe, when known
  std::string command;   // that produced it
  std::map<std::string, OpFit> compute;         // by op kind name ("F", "B", ...)
  std::optional<double> latency_s, bandwidth;   // the link, bytes/s
  std::optional<double> step_overhead_s, step_seconds_per_param;
  std::optional<ProfileFit> profile;
};

// The config with the calibration's device profile (if any) in place of the
// catalogue's, for every device of the calibrated kind.
cost::Config WithProfile(const cost::Config& config, const Calibration& calibration);

// Traces measured with one config's plan.
struct MeasuredRuns {
  const cost::Config* config = nullptr;
  const cost::Plan* plan = nullptr;
  std::vector<traces::Trace> traces;
};

// Fits from traces measured with `plan` (every trace must be of its stages
// and micro-batches). Fails (bad input) when a trace does not fit the plan.
Result<Calibration> FitCalibration(const cost::Config& config, const cost::Plan& plan,
                                   const std::vector<traces::Trace>& measured);
// Fits one calibration to runs of several configs of one device kind (bad
// input otherwise). Runs of different micro-batch sizes tell a fixed cost
// per op (launches) from a cost per sample, which one size cannot.
Result<Calibration> FitCalibration(const std::vector<MeasuredRuns>& runs);

std::string WriteCalibration(const Calibration& calibration);
Result<Calibration> ReadCalibration(std::string_view text, std::string_view source);

// Seconds of op kind `kind` for one micro-batch of the cell's layers, as the
// calibration predicts (the uncalibrated roofline where it has no fit; R
// without samples of its own takes F's fit).
double CalibratedOpTime(const cost::Config& config, const Calibration* calibration, int first_layer, int last_layer,
                        ir::OpKind kind, const cost::Device& device);

// CalibratedOpTime for many cells of one model and device, for F, B, I, W
// and R: the layers' times taken once (a cell's first layer is not timed
// again where it costs what the layer before it does), each cell's summed
// in the same order.
class CalibratedOpTimes {
 public:
  static constexpr std::array<ir::OpKind, 5> kKinds = {ir::OpKind::kForward, ir::OpKind::kBackward,
                                                       ir::OpKind::kBackwardInput, ir::OpKind::kBackwardWeight,
                                                       ir::OpKind::kRecompute};
  CalibratedOpTimes(const cost::Config& config, const Calibration* calibration, const cost::Device& device);
  double Cell(ir::OpKind kind, int first_layer, int last_layer) const;  // equals CalibratedOpTime's

 private:
  std::array<const OpFit*, kKinds.size()> fits_{};
  std::vector<std::array<double, kKinds.size()>> layer_s_;
};

}  // namespace twinpipe::simulate
