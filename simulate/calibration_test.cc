#include "partition/pipeline_plan.h"
#include "simulate/calibration.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cost_models/plan_costs.h"
#include "simulate/report.h"
#include "ir/builders.h"
#include "ir/passes.h"

namespace twinpipe::simulate {
namespace {

cost::Config Mlp() {
  auto c = cost::LoadConfig(R"({
    "model": {"generator": "mlp", "layers": 8, "width": 128, "input": 32, "classes": 10, "norm": "layernorm", "residual": true},
    "training": {"batch": 64, "microbatches": 8, "optimizer": "adam", "bytes_per_param": 24},
    "pipeline": {"stages": 2, "schedule": "gpipe", "recompute": "none"},
    "cluster": {"device": "CPU", "devices": 2, "link": "inproc"}})",
                            "t.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

TEST(Calibration, RecoversTheCoefficientsThatMadeATrace) {
  const cost::Config c = Mlp();
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  // "Measure" with known coefficients: every layer kind 3x slower forward,
  // 2x slower backward; a slower link; a known step. (With two cells the
  // per-layer-kind scales and the per-op overhead are not all identifiable;
  // the fit prefers one scale for all kinds, which these are.)
  Calibration truth;
  for (const char* kind : {"F", "B", "R"}) {
    OpFit fit;
    fit.overhead_s = 0;
    for (const char* layer : {"linear", "residual_block", "head"}) fit.scale[layer] = kind[0] == 'B' ? 2.0 : 3.0;
    truth.compute[kind] = fit;
  }
  truth.latency_s = 2e-5;
  truth.bandwidth = 3e9;
  truth.step_overhead_s = 0;
  truth.step_seconds_per_param = 2e-9;
  auto measured = Simulate(plan->schedule, CostsFromPlan(c, *plan, &truth));
  ASSERT_TRUE(measured);
  const traces::Trace trace = ToTrace(plan->schedule, *measured, "execute:cpu");
  auto fitted = FitCalibration(c, *plan, {trace});
  ASSERT_TRUE(fitted) << fitted.error().message;
  auto predicted = Simulate(plan->schedule, CostsFromPlan(c, *plan, &*fitted));
  ASSERT_TRUE(predicted);
  EXPECT_NEAR(predicted->step_time_s, measured->step_time_s, 1e-3 * measured->step_time_s);
  // And it predicts another schedule of the same model.
  auto other = partition::PlanFromConfig(c, {"1f1b", ir::RecomputeMode::kFull});
  ASSERT_TRUE(other);
  auto other_true = Simulate(other->schedule, CostsFromPlan(c, *other, &truth));
  auto other_fit = Simulate(other->schedule, CostsFromPlan(c, *other, &*fitted));
  ASSERT_TRUE(other_true && other_fit);
  EXPECT_NEAR(other_fit->step_time_s, other_true->step_time_s, 1e-2 * other_true->step_time_s);
  EXPECT_NEAR(fitted->compute["F"].scale["residual_block"], 3.0, 0.05);
  EXPECT_NEAR(fitted->compute["B"].scale["residual_block"], 2.0, 0.05);
  EXPECT_EQ(*fitted->step_overhead_s, 0);
  EXPECT_NEAR(*fitted->step_seconds_per_param, 2e-9, 1e-11);
  // One message size: the transfer time is fitted (as latency, at the
  // catalogue's bandwidth), not latency and bandwidth apart.
  const double bytes = static_cast<double>(plan->schedule.programs[0][1].bytes);
  ASSERT_GT(bytes, 0);
  EXPECT_NEAR(*fitted->latency_s + bytes / c.cluster.link.bandwidth, 2e-5 + bytes / 3e9, 1e-9);
  // Uncalibrated, the same simulation is far off: the fit did the work.
  auto plain = Simulate(plan->schedule, CostsFromPlan(c, *plan));
  EXPECT_GT(std::abs(plain->step_time_s - measured->step_time_s), 0.2 * measured->step_time_s);
  // A trace whose ops all last nothing fits nothing (it would calibrate
  // every scale to 0).
  traces::Trace frozen = trace;
  for (auto& e : frozen.events) e.end_s = e.start_s;
  auto none = FitCalibration(c, *plan, {frozen});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(none.error().message.find("every F op of the traces lasts 0 s"), std::string::npos)
      << none.error().message;
}

// A fixed cost per op (launches) and a cost per sample: one micro-batch size
// cannot tell them apart, two can. "Measured" with overhead 0.4 ms and scale
// 2.5 on every layer kind, at M=4 and M=16 (micro-batches of 16 and 4), on
// one device (one cell: its layer kinds' scales cannot be told apart, their
// sum can).
cost::Config OneCell(int micro_batches) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "mlp", "layers": 8, "width": 128, "input": 32, "classes": 10, "norm": "layernorm"}},
    "training": {{"batch": 64, "microbatches": {}, "optimizer": "adam"}},
    "pipeline": {{"stages": 1, "schedule": "gpipe", "recompute": "full"}},
    "cluster": {{"device": "CPU", "devices": 1, "link": "inproc"}}}})", micro_batches), "t.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// F, B and R each `fit`'s fixed times with scale 2.5 on every layer kind of
// the MLP: the coefficients "measured" runs are made with.
Calibration ScaledTruth(OpFit fit) {
  for (const char* layer : {"linear", "residual_block", "head"}) fit.scale[layer] = 2.5;
  Calibration truth;
  for (const char* kind : {"F", "B", "R"}) truth.compute[kind] = fit;
  return truth;
}

TEST(Calibration, RunsOfTwoMicroBatchSizesSeparateOverheadFromScale) {
  cost::Config c4 = OneCell(4), c16 = OneCell(16);
  const Calibration truth = ScaledTruth(OpFit{.overhead_s = 4e-4});
  auto measure = [&](const cost::Config& c, cost::Plan& plan) {
    auto p = partition::PlanFromConfig(c);
    EXPECT_TRUE(p);
    plan = std::move(*p);
    auto r = Simulate(plan.schedule, CostsFromPlan(c, plan, &truth));
    EXPECT_TRUE(r);
    return ToTrace(plan.schedule, *r, "execute:cpu");
  };
  cost::Plan p4, p16;
  const traces::Trace t4 = measure(c4, p4), t16 = measure(c16, p16);
  auto both = FitCalibration({MeasuredRuns{&c4, &p4, {t4}}, MeasuredRuns{&c16, &p16, {t16}}});
  ASSERT_TRUE(both) << both.error().message;
  // The fit puts the fixed time on the cell's layers: 8 linear, the input and the head.
  const int layers = static_cast<int>(c4.model.layers.size());
  for (const char* kind : {"F", "B"}) {
    EXPECT_EQ(both->compute[kind].overhead_s, 0) << kind;
    EXPECT_NEAR(both->compute[kind].Overhead(layers), 4e-4, 2e-5) << kind;  // the ridge on the scales pulls a little
  }
  // A third size, M=8, predicted by the two-size fit; the fit to M=4 alone
  // folds the overhead into the scale and misses it.
  cost::Config c8 = OneCell(8);
  auto p8 = partition::PlanFromConfig(c8);
  ASSERT_TRUE(p8);
  auto truth8 = Simulate(p8->schedule, CostsFromPlan(c8, *p8, &truth));
  auto from_both = Simulate(p8->schedule, CostsFromPlan(c8, *p8, &*both));
  auto one = FitCalibration(c4, p4, {t4});
  ASSERT_TRUE(one);
  auto from_one = Simulate(p8->schedule, CostsFromPlan(c8, *p8, &*one));
  ASSERT_TRUE(truth8 && from_both && from_one);
  EXPECT_NEAR(from_both->step_time_s, truth8->step_time_s, 5e-3 * truth8->step_time_s);
  EXPECT_GT(std::abs(from_one->step_time_s - truth8->step_time_s), 0.05 * truth8->step_time_s)
      << from_one->step_time_s << " vs " << truth8->step_time_s;
  // Runs of two device kinds make no one calibration.
  cost::Config gpu = cost::LoadConfig(R"({
    "model": {"generator": "mlp", "layers": 8, "width": 128, "input": 32, "classes": 10},
    "training": {"batch": 64, "microbatches": 8},
    "pipeline": {"stages": 2, "schedule": "gpipe"},
    "cluster": {"device": "H100-SXM", "devices": 2, "link": "nvlink4"}})", "g.json").value();
  auto gp = partition::PlanFromConfig(gpu);
  ASSERT_TRUE(gp);
  auto mixed = FitCalibration({MeasuredRuns{&c4, &p4, {t4}}, MeasuredRuns{&gpu, &*gp, {}}});
  ASSERT_FALSE(mixed);
  EXPECT_NE(mixed.error().message.find("one device kind"), std::string::npos) << mixed.error().message;
}

TEST(Calibration, FileRoundTripsAndBadFilesNameThePath) {
  Calibration cal;
  cal.device = "CPU";
  cal.command = "twinpipe calibrate x.json --config c.json";
  cal.compute["F"] = OpFit{1e-5, {{"linear", 2.5}}, 7};
  cal.compute["B"] = OpFit{0, {{"linear", 3.0}}, 7, 2e-6};
  cal.latency_s = 1e-6;
  const std::string text = cost::WriteCalibration(cal);
  auto back = cost::ReadCalibration(text, "cal.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(cost::WriteCalibration(*back), text);
  EXPECT_EQ(back->compute["B"].overhead_per_layer_s, 2e-6);
  auto message = [](std::string_view file) {
    auto read = cost::ReadCalibration(file, "cal.json");
    return read ? std::string("(read without error)") : read.error().message;
  };
  EXPECT_EQ(message("{}"), "cal.json: /format: expected \"twinpipe-calibration\"");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "compute": {"Q": {}}})"),
            "cal.json: /compute/Q: expected an op kind (F, B, I, W, R)");
  // Type errors name their path (the file's reader is the config's).
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "link": {"bandwidth": "fast"}})"),
            "cal.json: /link/bandwidth: expected a number, got \"fast\"");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration",
                        "compute": {"F": {"overhead_s": 0, "scale": {"linear": []}}}})"),
            "cal.json: /compute/F/scale/linear: expected a number, got []");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "compute": {"F": {"scale": {}}}})"),
            "cal.json: /compute/F: missing key 'overhead_s' (a number)");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "step": 3})"),
            "cal.json: /step: expected an object, got number");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "stpe": {}})"),
            "cal.json: /stpe: unknown key (expected one of command, commit, compute, coverage, device, format, link, "
            "profile, step, version)");
  // A file of another version, and fits of no device kind (they would
  // apply to any device), are refused.
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "version": 2, "device": "CPU"})"),
            "cal.json: /version: expected an integer from 1 to 1, got 2");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "compute": {"F": {"overhead_s": 0, "scale": {}}}})")
                .substr(0, 49),
            "cal.json: /device: missing or empty: the device k");
  EXPECT_EQ(message(R"({"format": "twinpipe-calibration", "device": "", "profile": {"gemm_efficiency": 0.9,
      "bandwidth_efficiency": 0.8, "launch_overhead_s": 1e-5}})").substr(0, 35),
            "cal.json: /device: missing or empty");
  // A profile written before the kernel floor was fitted reads as none.
  const std::string profile = R"({"format": "twinpipe-calibration", "device": "H100-SXM", "profile": {"gemm_efficiency": 0.9,
      "bandwidth_efficiency": 0.8, "launch_overhead_s": 1e-5)";
  auto old = cost::ReadCalibration(profile + "}}", "cal.json");
  ASSERT_TRUE(old && old->profile) << old.error().message;
  EXPECT_EQ(old->profile->kernel_floor_s, 0);
  // Nor a kernel launch fitted apart: its launch_overhead_s includes it.
  EXPECT_EQ(old->profile->kernel_launch_s, 0);
  // Nor the drift it was fitted under: it predicts with the catalogue's,
  // and one that records it with that.
  EXPECT_FALSE(old->profile->drift);
  auto h100 = cost::LoadConfig(R"({"model": {"generator": "mlp", "layers": 2, "width": 64, "input": 8, "classes": 2},
      "training": {"batch": 4, "microbatches": 2}, "pipeline": {"stages": 1},
      "cluster": {"device": "H100-SXM", "devices": 1}})", "c.json");
  ASSERT_TRUE(h100) << h100.error().message;
  const double catalogue = cost::FindDevice("H100-SXM")->drift;
  ASSERT_GT(catalogue, 0);
  cost::Calibration with_drift = *old;
  with_drift.device = "H100-SXM";
  EXPECT_EQ(cost::WithProfile(*h100, with_drift).cluster.devices[0].drift, catalogue);
  auto recorded = cost::ReadCalibration(profile + R"(, "drift": 0.25}})", "cal.json");
  ASSERT_TRUE(recorded && recorded->profile) << recorded.error().message;
  EXPECT_EQ(recorded->profile->drift, 0.25);
  with_drift.profile = recorded->profile;
  EXPECT_EQ(cost::WithProfile(*h100, with_drift).cluster.devices[0].drift, 0.25);
  EXPECT_EQ(cost::ReadCalibration(cost::WriteCalibration(with_drift), "cal.json")->profile->drift, 0.25);
  EXPECT_EQ(cost::ReadCalibration(profile + R"(, "drift": 2}})", "cal.json").error().message,
            "cal.json: /profile/drift: expected a number >= 0 and at most 1, got 2");
  // The overlap interference alike: absent, the catalogue's; recorded, its own.
  EXPECT_FALSE(old->profile->overlap_interference);
  cost::Calibration with_interference = *old;
  with_interference.device = "H100-SXM";
  EXPECT_EQ(cost::WithProfile(*h100, with_interference).cluster.devices[0].overlap_interference,
            cost::FindDevice("H100-SXM")->overlap_interference);
  auto interference = cost::ReadCalibration(profile + R"(, "overlap_interference": 0.3}})", "cal.json");
  ASSERT_TRUE(interference && interference->profile) << interference.error().message;
  with_interference.profile = interference->profile;
  EXPECT_EQ(cost::WithProfile(*h100, with_interference).cluster.devices[0].overlap_interference, 0.3);
  EXPECT_EQ(cost::ReadCalibration(cost::WriteCalibration(with_interference), "cal.json")
                ->profile->overlap_interference,
            0.3);
  EXPECT_EQ(cost::ReadCalibration(profile + R"(, "overlap_interference": 1.5}})", "cal.json").error().message,
            "cal.json: /profile/overlap_interference: expected a number >= 0 and at most 1, got 1.5");
  EXPECT_EQ(cost::ReadCalibration(profile + R"(, "kernel_launch_s": 2}})", "cal.json").error().message,
            "cal.json: /profile/kernel_launch_s: expected a number >= 0 and at most 1, got 2");
  EXPECT_EQ(cost::ReadCalibration(profile + R"(, "kernel_floor_s": -1}})", "cal.json").error().message,
            "cal.json: /profile/kernel_floor_s: expected a number >= 0 and at most 1, got -1");
  // A fit's report per coefficient: each field checked, its path named.
  auto coefficients = [&](const std::string& gemm) {
    const std::string ok = R"({"value": 0.8, "range": [0.6, 0.92], "status": "held", "sensitivity": 0.1})";
    return profile + R"(, "coefficients": {"gemm_efficiency": )" + gemm + R"(, "bandwidth_efficiency": )" + ok +
           R"(, "launch_overhead_s": {"value": 1e-5, "range": [1e-6, 5e-5], "status": "fitted", "std_error": 1e-7},
           "kernel_floor_s": {"value": 1e-6, "range": [5e-7, 5e-6], "status": "fitted"}}}})";
  };
  auto good = cost::ReadCalibration(
      coefficients(R"({"value": 0.9, "range": [0.4, 0.92], "status": "fitted", "note": "n", "std_error": 0.01})"),
      "cal.json");
  ASSERT_TRUE(good && good->profile) << good.error().message;
  ASSERT_EQ(good->profile->coefficients.size(), 4u);
  EXPECT_EQ(good->profile->coefficients[0].std_error, 0.01);
  EXPECT_FALSE(good->profile->coefficients[1].std_error);
  EXPECT_EQ(good->profile->coefficients[1].status, cost::CoefficientFit::Status::kHeld);
  EXPECT_EQ(message(coefficients(R"({"value": 0.9, "range": [0.4, 0.92], "status": "guessed"})")),
            "cal.json: /profile/coefficients/gemm_efficiency/status: 'guessed' is not one of fitted, at lower bound, "
            "at upper bound, held");
  EXPECT_EQ(message(coefficients(R"({"value": 0.9, "range": [0.4], "status": "fitted"})")),
            "cal.json: /profile/coefficients/gemm_efficiency/range: expected [low, high], got [0.4]");
  EXPECT_EQ(message(coefficients(R"({"value": 0.95, "range": [0.4, 0.92], "status": "fitted"})")),
            "cal.json: /profile/coefficients/gemm_efficiency: value 0.95 outside its range [0.4, 0.92]");
  EXPECT_EQ(message(coefficients(R"({"value": 0.9, "status": "fitted"})")),
            "cal.json: /profile/coefficients/gemm_efficiency: missing key 'range' (an array)");
  EXPECT_EQ(message(profile + R"(, "coefficients": {}}})"),
            "cal.json: /profile/coefficients: missing section 'gemm_efficiency'");
  EXPECT_EQ(message(profile + R"(, "warnings": ["a", 3]}})"), "cal.json: /profile/warnings/1: expected a string");
}

TEST(SerialComm, SendsAndReceivesOccupyTheWorker) {
  // GPipe K=2, M=2: with comm on the compute stream, device 0's second
  // forward waits for its first send; overlapped, it does not.
  ir::Schedule s = *ir::BuildByName("gpipe", 2, 2);
  ASSERT_TRUE(ir::InsertComm(s, {{1000000}, {1000000}}));
  PlanCosts c = UniformCosts(s, 1e-3, 2e-3);
  c.link = cost::Link{.name = "l", .latency_s = 0, .bandwidth = 1e9};  // 1 ms per transfer
  auto overlapped = Simulate(s, c);
  c.comm_on_compute_stream = true;
  auto serial = Simulate(s, c);
  ASSERT_TRUE(overlapped && serial);
  const int32_t f1 = s.programs[0][2].id;  // 0F0 0SEND_F0 0F1 ...
  ASSERT_EQ(s.programs[0][2].kind, ir::OpKind::kForward);
  EXPECT_DOUBLE_EQ(overlapped->start_s[f1], 1e-3);
  EXPECT_DOUBLE_EQ(serial->start_s[f1], 2e-3);
  EXPECT_GT(serial->step_time_s, overlapped->step_time_s);
}

// The fixed time is per layer (each launches its kernels), so a fit to one
// device's runs (one cell of every layer) predicts a pipeline of K cells on
// one GPU (cluster.gpus 1): with per-layer overhead and scale 2.5 as the
// truth, the two-size fit at K=1 gives the K=2 and K=4 steps; a fixed time
// per op would be charged K times.
TEST(Calibration, AFitOnOneDeviceCarriesToMoreStagesOnOneGpu) {
  const Calibration truth = ScaledTruth(OpFit{.overhead_per_layer_s = 5e-5});
  auto simulate = [&](const cost::Config& c, const Calibration& cal, cost::Plan* keep = nullptr) {
    auto p = partition::PlanFromConfig(c);
    EXPECT_TRUE(p) << p.error().message;
    auto r = Simulate(p->schedule, CostsFromPlan(c, *p, &cal));
    EXPECT_TRUE(r) << r.error().message;
    if (keep) *keep = std::move(*p);
    return *r;
  };
  cost::Config c4 = OneCell(4), c16 = OneCell(16);
  cost::Plan p4, p16;
  const traces::Trace t4 = ToTrace(p4.schedule, simulate(c4, truth, &p4), "execute:cuda");
  const traces::Trace t16 = ToTrace(p16.schedule, simulate(c16, truth, &p16), "execute:cuda");
  auto fitted = FitCalibration({MeasuredRuns{&c4, &p4, {t4}}, MeasuredRuns{&c16, &p16, {t16}}});
  ASSERT_TRUE(fitted) << fitted.error().message;
  for (int K : {2, 4}) {
    auto c = cost::LoadConfig(fmt::format(R"({{
      "model": {{"generator": "mlp", "layers": 8, "width": 128, "input": 32, "classes": 10, "norm": "layernorm"}},
      "training": {{"batch": 64, "microbatches": 8, "optimizer": "adam"}},
      "pipeline": {{"stages": {0}, "schedule": "gpipe", "recompute": "full"}},
      "cluster": {{"device": "CPU", "devices": {0}, "gpus": 1, "link": "inproc"}}}})", K), "k.json");
    ASSERT_TRUE(c) << c.error().message;
    const double want = simulate(*c, truth).step_time_s, got = simulate(*c, *fitted).step_time_s;
    EXPECT_NEAR(got, want, 0.01 * want) << "K=" << K;
  }
}

}  // namespace
}  // namespace twinpipe::simulate
