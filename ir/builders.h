// Schedule builders: compute-only programs (F, B, STEP) for one stage per
// device, placement stage s -> device s. Passes then add recompute and comm.
//
//   Schedule s = Build1F1B(/*stages=*/4, /*micro_batches=*/8);
//   InsertRecompute(s, RecomputeMode::kFull); InsertComm(s, {});
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

// Model parallelism without pipelining (GPipe Figure 2b): each micro-batch's
// forward and backward run through all stages before the next one starts
// (gradient accumulation); with M = 1 it is the paper's figure exactly.
Schedule BuildNaive(int32_t stages, int32_t micro_batches);

// GPipe (Figure 2c): every stage runs all M forwards, then all M backwards,
// last micro-batch first (its activations are the freshest).
Schedule BuildGpipe(int32_t stages, int32_t micro_batches);

// 1F1B / PipeDream-flush: stage s runs min(K-s-1, M) warm-up forwards, then
// alternates one forward and one backward, then drains the backwards; at most
// min(K-s, M) forwards of stage s await their backward.
Schedule Build1F1B(int32_t stages, int32_t micro_batches);

// The names accepted by BuildByName, in the order `--help` lists them.
const std::vector<std::string>& BuilderNames();

// Dispatches on a builder name; an unknown name or K, M < 1 is an error.
Result<Schedule> BuildByName(std::string_view name, int32_t stages, int32_t micro_batches);

}  // namespace twinpipe::ir
