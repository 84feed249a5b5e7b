// torch.distributed.pipelining schedule CSVs: one row per rank, one action per
// cell ("0F0", "2SEND_F1", "(0F7;7B3)OVERLAP_F_B"; an empty cell is an idle
// slot). Two dialects: the current one (I = input backward, W = weight
// backward, B = full backward) and the older one (B = input backward,
// W = weight backward, BW = full backward).
//
//   auto imported = ImportTorchCsv(text, "zb.csv", TorchDialect::kAuto);
//   imported->dialect  // the dialect used; imported->schedule is verified input
#pragma once

#include <string>
#include <string_view>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

enum class TorchDialect { kAuto, kCurrent, kOlder };
std::string_view TorchDialectName(TorchDialect dialect);
std::optional<TorchDialect> TorchDialectFromName(std::string_view name);

struct TorchImport {
  Schedule schedule;
  TorchDialect dialect = TorchDialect::kCurrent;  // the one used (never kAuto)
  bool had_comm = false;  // the file held comm actions (else comm was inserted)
  int overlapped = 0;     // OVERLAP_F_B cells split into their two ops
  int idle_slots = 0;     // empty cells skipped
};

// Auto-detection: any I token means current; a BW token, or B and W for the
// same (stage, micro-batch) with no I, means older; otherwise current. A
// compute-only file gets comm inserted (InsertComm); a file with comm actions
// is kept as written. Each device that computes gets a final STEP (torch
// steps the optimizer outside its schedule). Ranks are devices; a stage lives
// on the rank whose row holds its compute actions.
Result<TorchImport> ImportTorchCsv(std::string_view text, std::string_view source,
                                   TorchDialect dialect);

// One row per device in the given dialect (kAuto means current). STEP,
// ALLREDUCE and R have no torch action and are left out; `dropped` counts them.
std::string ExportTorchCsv(const Schedule& schedule, TorchDialect dialect, int* dropped = nullptr);

}  // namespace twinpipe::ir
