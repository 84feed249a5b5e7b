// Prediction against measurement, op by op: two traces of one schedule (the
// same stages, micro-batches, devices, placement, and on every device the
// same ops in the same order) are aligned by (device, kind, stage,
// micro-batch) and their step time, per-kind durations, per-device busy
// time, bubble fraction and peak memory compared.
//
//   Result<Comparison> c = Compare(predicted, measured);
//   c->step_time_error;  // (predicted - measured) / measured
#pragma once

#include <string>
#include <vector>

#include "ir/result.h"
#include "traces/trace.h"

namespace twinpipe::traces {

// What a trace says about its step as a whole.
struct LinkSummary {
  int32_t src = 0, dst = 0;
  int64_t bytes = 0;
  double busy_s = 0;                   // its transfers' summed durations
};
struct TraceSummary {
  double step_time_s = 0;              // last end - first start
  double bubble_fraction = 0;          // 1 - compute busy / (devices x step time)
  std::vector<double> busy_s;          // per device, compute stream
  std::vector<double> peak_memory_bytes;  // per device, from the memory samples
  std::vector<LinkSummary> links;      // per device pair that sends, in the order of their first send
};
TraceSummary Summarize(const Trace& trace);

struct KindError {
  std::string kind;
  int count = 0;            // ops with a measured duration (the errors are theirs)
  double median_error = 0;  // of |predicted - measured| / measured durations
  double worst_error = 0;
  // Ops measured at no time (a ZB input gradient with nothing to compute,
  // as torch runs the first stage's): no relative error, left out of the
  // median, the worst and the ten largest.
  int zero_time = 0;
};

struct DeviceError {
  int device = 0;
  double busy_predicted_s = 0, busy_measured_s = 0, busy_error = 0;
  double peak_memory_predicted = 0, peak_memory_measured = 0, peak_memory_error = 0;
};

struct OpError {
  int32_t measured_id = 0;
  int device = 0;
  std::string op;           // token, e.g. "2F5"
  double predicted_s = 0, measured_s = 0, error = 0;  // durations; relative error (signed)
};

struct Comparison {
  // Ops of the prediction, and of them those compared: all, but for a
  // torch.profiler trace, which times only the ops torch labels (the step
  // time, bubble and busy times are then those of the compared ops in both).
  int ops_predicted = 0, ops_compared = 0;
  bool memory_measured = true;  // the measured trace has memory samples
  double step_time_predicted_s = 0, step_time_measured_s = 0, step_time_error = 0;
  double bubble_fraction_predicted = 0, bubble_fraction_measured = 0;
  std::vector<KindError> per_kind;
  std::vector<DeviceError> devices;
  std::vector<OpError> worst;  // the ten ops with the largest |error|
};

// Fails (bad input) when the traces are of different schedules, saying what
// differs: for the op order, the first device and position (from 0, as the
// verifier counts) and the two ops there.
Result<Comparison> Compare(const Trace& predicted, const Trace& measured);

std::string ComparisonJson(const Comparison& c);
std::string ComparisonTable(const Comparison& c);

}  // namespace twinpipe::traces
