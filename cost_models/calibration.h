// A calibration: cost-model coefficients fitted to measurements, its file,
// and the op times it predicts. Per op kind (F, B, I, W, R): a scale on each
// layer kind's predicted roofline time plus a fixed overhead per op; the
// link's latency and bandwidth; the optimizer step's overhead and time per
// parameter; or a device profile (GEMM and bandwidth fractions, host time
// and GPU floor per framework op) fitted to a table of runs, with the range
// of runs it was fitted on (cost_models/coverage.h). Fitting lives in
// simulate/ (simulate/calibration.h); everything that prices a plan reads it
// here, so the partitioner, the auto builder and both engines charge alike.
//
//   Result<Calibration> cal = ReadCalibration(text, "cal.json");
//   double f_s = CalibratedOpTime(config, &*cal, 0, 3, ir::OpKind::kForward, config.cluster.devices[0]);
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost_models/config.h"
#include "cost_models/coverage.h"
#include "ir/result.h"

namespace twinpipe::cost {

struct OpFit {
  double overhead_s = 0;                        // per op
  std::map<std::string, double> scale;          // per layer kind: x predicted roofline time
  int samples = 0;
  // Per layer of the op's cell: the kernels each layer launches cost time
  // whatever the samples, so a cell of fewer layers (more stages) pays less.
  // What `calibrate` fits from traces (overhead_s stays 0 there).
  double overhead_per_layer_s = 0;
  double Overhead(int layers) const { return overhead_s + layers * overhead_per_layer_s; }
};

// How one coefficient of a profile came out of a fit: its value, the
// physical range the fit held it to, and how well the runs determine it.
struct CoefficientFit {
  enum class Status { kFitted, kAtLowerBound, kAtUpperBound, kHeld };
  double value = 0;
  double low = 0, high = 0;  // the physical range (ProfileRanges)
  Status status = Status::kFitted;
  // RMS over the runs of the change of ln(step time) as the coefficient goes
  // from one end of its range to the other, the others at the fit: below
  // 0.5% the runs do not determine it.
  double sensitivity = 0;
  // The square root of the coefficient's diagonal term of s^2 (J^T J)^-1
  // (s^2 the residuals' variance, J the runs' slopes), in the coefficient's
  // unit: the fit's linearised spread, a scale rather than an interval (an
  // absolute-error fit under normal residuals spreads sqrt(pi / 2) times
  // as far; residuals the fit ignores, a run far off, widen s); none for a
  // held coefficient, or where the runs leave no degree of freedom or do not
  // determine the free coefficients jointly.
  std::optional<double> std_error;
  std::string note;  // why it was held, or what its bound means
  // The runs that pull a fitted coefficient hardest, by their term of the
  // fit's gradient (of the mean absolute relative error, to first order):
  // the run's slope in the coefficient, d ln(step time), with the sign of
  // its error, each as a share of the terms' absolute sum; how far off a
  // run is does not weigh it, and one within kQuietFit of its measurement
  // pulls nothing. Positive asks for a higher value.
  // An absolute-error fit passes through some runs (as many as it has free
  // coefficients, where it is unique), and at a fit inside the range those,
  // which pull nothing here, and the rest balance; so a coefficient pulled
  // one way by a few runs that move it most and the other by many is where
  // those few carry a cost the model lacks; at a bound (--keep-bounds) they
  // lean the way the bound stops. Up to kPullsEachWay each way, largest
  // first; none for a held coefficient or where the runs are fitted to
  // within kQuietFit (RMS).
  struct Pull {
    int line = 0;  // the run's line in its table
    double share = 0;
  };
  std::vector<Pull> pulled_by;
};
inline constexpr size_t kPullsEachWay = 3;
inline constexpr double kQuietFit = 1e-3;  // RMS relative error
std::string_view StatusName(CoefficientFit::Status status);

// A profile coefficient's physical range and where it comes from.
struct CoefficientRange {
  std::string_view name;  // "gemm_efficiency", as in the file
  double low, high;
  std::string_view why;
};
// The names of a profile's fitted coefficients, in the order every list of
// them keeps (ranges, fits, the file's keys).
inline constexpr std::array<std::string_view, 5> kProfileCoefficients{
    "gemm_efficiency", "bandwidth_efficiency", "launch_overhead_s", "kernel_floor_s", "kernel_launch_s"};

// The ranges of the five fitted coefficients of `device`'s kind, in
// kProfileCoefficients' order (their sources in calibration.cc). A GPU
// (sm_count > 0) gets the published ranges; another device (a CPU core, a
// TPU) wide ones, none being published.
const std::array<CoefficientRange, kProfileCoefficients.size()>& ProfileRanges(const Device& device);

// A device profile's coefficients fitted to a table of runs' iteration
// times (`calibrate --runs`, simulate/runs.h): they replace the catalogue's
// figures for every device of the calibrated kind.
struct ProfileFit {
  double gemm_efficiency = 0;       // achievable fraction of GEMM peak
  double bandwidth_efficiency = 0;  // achievable fraction of memory bandwidth
  double launch_overhead_s = 0;     // host time per framework op
  double kernel_floor_s = 0;        // GPU time per framework op beyond its bytes and FLOPs
  // Host time per kernel launch; 0 in files written before it was fitted
  // apart, whose launch_overhead_s includes it.
  double kernel_launch_s = 0;
  int runs = 0;                     // fitted on
  // The device's drift (Device::drift) the fit was made under: a measured
  // figure the fit holds, not one it fits, recorded so that the prediction
  // uses the same one when the catalogue's later changes. Absent in files
  // written before it was recorded: the catalogue's.
  std::optional<double> drift;
  // The same for the device's overlap_interference.
  std::optional<double> overlap_interference;
  // Per coefficient, in ProfileRanges' order (empty in files written before
  // fits reported them), and the fit's warnings (a bound reached, a
  // coefficient held).
  std::vector<CoefficientFit> coefficients;
  std::vector<std::string> warnings;
};

// Where each profile coefficient lives in a fit and in a device, in
// kProfileCoefficients' order: what WithProfile and `calibrate --runs` copy
// from one to the other.
struct ProfileMember {
  double ProfileFit::*fit;
  double Device::*device;
};
inline constexpr std::array<ProfileMember, kProfileCoefficients.size()> kProfileMembers{{
    {&ProfileFit::gemm_efficiency, &Device::gemm_efficiency},
    {&ProfileFit::bandwidth_efficiency, &Device::bandwidth_efficiency},
    {&ProfileFit::launch_overhead_s, &Device::launch_overhead_s},
    {&ProfileFit::kernel_floor_s, &Device::kernel_floor_s},
    {&ProfileFit::kernel_launch_s, &Device::kernel_launch_s},
}};

struct Calibration {
  std::string device;    // the device kind measured
  std::string commit;    // of twinpipe, when known
  std::string command;   // that produced it
  std::map<std::string, OpFit> compute;         // by op kind name ("F", "B", ...)
  std::optional<double> latency_s, bandwidth;   // the link, bytes/s
  std::optional<double> step_overhead_s, step_seconds_per_param;
  std::optional<ProfileFit> profile;
  // What the runs it was fitted on span (`calibrate --runs`), so that a
  // prediction outside it says it extrapolates; none in files written
  // before it was recorded, or fitted from traces.
  std::optional<Coverage> coverage;
};

// The config with the calibration's device profile (if any, its drift
// where it records one) in place of the catalogue's, for every device of the
// calibrated kind.
Config WithProfile(const Config& config, const Calibration& calibration);

std::string WriteCalibration(const Calibration& calibration);
Result<Calibration> ReadCalibration(std::string_view text, std::string_view source);

// The calibration's fit for op kind `kind`, if any (R without samples of its
// own takes F's); null without a calibration.
const OpFit* FitFor(const Calibration* calibration, ir::OpKind kind);

// Predicted roofline seconds of one micro-batch of layer i for op `kind`,
// without the device's launch overhead (which a fit's own overhead replaces):
// what a calibration's per-layer-kind scales multiply.
double RooflineOpTime(const Config& config, int layer, ir::OpKind kind, const Device& device);

// Seconds of op kind `kind` for one micro-batch of the cell's layers, as the
// calibration predicts (the uncalibrated roofline where it has no fit; R
// without samples of its own takes F's fit). A null calibration: the
// catalogue's figures.
double CalibratedOpTime(const Config& config, const Calibration* calibration, int first_layer, int last_layer,
                        ir::OpKind kind, const Device& device);

// CalibratedOpTime for many cells of one model and device, for F, B, I, W
// and R: the layers' times taken once (a cell's first layer is not timed
// again where it costs what the layer before it does), each cell's summed
// in the same order.
class CalibratedOpTimes {
 public:
  static constexpr std::array<ir::OpKind, 5> kKinds = {ir::OpKind::kForward, ir::OpKind::kBackward,
                                                       ir::OpKind::kBackwardInput, ir::OpKind::kBackwardWeight,
                                                       ir::OpKind::kRecompute};
  CalibratedOpTimes(const Config& config, const Calibration* calibration, const Device& device);
  double Cell(ir::OpKind kind, int first_layer, int last_layer) const;  // equals CalibratedOpTime's
  // One layer's seconds for `kind`, without the fit's per-op overhead.
  double Layer(ir::OpKind kind, int layer) const { return layer_s_[layer][Slot(kind)]; }
  // Of Cell's seconds, the expert all-to-alls' (LayerAllToAllTime): 0
  // without them.
  double AllToAllCell(ir::OpKind kind, int first_layer, int last_layer) const;
  bool HasAllToAll() const { return !all_to_all_s_.empty(); }

 private:
  static size_t Slot(ir::OpKind kind);
  std::array<const OpFit*, kKinds.size()> fits_{};
  std::vector<std::array<double, kKinds.size()>> layer_s_;
  std::vector<std::array<double, kKinds.size()>> all_to_all_s_;  // empty: no layer has an all-to-all
};

}  // namespace twinpipe::cost
