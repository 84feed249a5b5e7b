// The one path from a built shape (builders.h) to the schedule that is
// simulated and executed: the passes in their order (recompute, comm,
// all-reduce), then the verifier, once, on the result. `schedule`,
// `simulate`, `execute` and `search` all come through here
// (partition::PlanFromConfig, or the schedule command without a config).
//
//   Schedule s = *BuildByName("1f1b", 4, 8);
//   if (auto ok = CompletePipeline(s, {.recompute = RecomputeMode::kFull}); !ok) ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/passes.h"
#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

struct PipelineOptions {
  RecomputeMode recompute = RecomputeMode::kNone;
  RecomputeTiming recompute_timing = RecomputeTiming::kOverlapped;
  CommBytes comm;                       // per stage boundary; empty: unknown (0)
  std::vector<int64_t> gradient_bytes;  // per stage, for ALLREDUCE (schedule.replicas > 1); empty: 0
  // Verify the result. Search's fast path does not: every builder's output
  // through these passes is verified over a grid by the tests
  // (builders_test, search_test), and search simulates thousands a second.
  bool verify = true;
  std::string what = "the schedule";  // names it in a failure
};

// A shape out of a builder, completed. A result that does not verify is a
// bug in twinpipe's builders or passes, not bad input: a runtime error with
// the first diagnostics.
Result<void> CompletePipeline(Schedule& schedule, const PipelineOptions& options);

// The verifier's verdict as a result: bad input naming `what`, with the
// first 20 diagnostics, one per line (for schedules read from files).
Result<void> VerifyOrFail(const Schedule& schedule, std::string_view what);

}  // namespace twinpipe::ir
