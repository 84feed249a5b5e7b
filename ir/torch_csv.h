// torch.distributed.pipelining schedule CSVs, read and written: one row per
// rank, one action per cell ("0F0", "2SEND_F1", "0UNSHARD",
// "(0F7;7B3)OVERLAP_F_B"; an empty cell is an idle slot).
//
//   auto imported = ImportTorchCsv(text, "zb.csv", TorchDialect::kAuto);
//   auto csv = ExportTorchCsv(schedule, {.version = {2, 11}, .compute_only = false});
//
// What each torch release writes and loads, read from its own source
// (torch/distributed/pipelining/schedules.py in the PyPI wheel of that
// release; line numbers of that file):
//
// | release   | actions (string form)                                    | gradient scaling (scale_grads)          |
// |-----------|----------------------------------------------------------|-----------------------------------------|
// | 2.5.1     | F B W UNSHARD RESHARD SEND_F RECV_F SEND_B RECV_B (L51,  | none (no scale_grads)                   |
// |           | regex L117). B is the full backward when the schedule is |                                         |
// |           | built with use_full_backward=True (default, L1051), the  |                                         |
// |           | input backward (and W allowed) when False.               |                                         |
// | 2.6.0     | F I W B(full) UNSHARD RESHARD SEND/RECV_F/B (regex L124) | none                                    |
// | 2.7, 2.8  | as 2.6                                                   | runtime: after a stage's M-th backward  |
// |           |                                                          | if that is a full B (2.7.1 L1699); a    |
// |           |                                                          | stage ending in W is never scaled       |
// | 2.9.1     | + OVERLAP_F_B, written "(a;b)OVERLAP_F_B" (L55)          | as 2.7 (L2034)                          |
// | 2.10-2.14 | + REDUCE_GRAD, no micro-batch (2.10.0 regex L126)        | only at REDUCE_GRAD (2.10.0 L2230,      |
// |           |                                                          | 2.14.1 L2863): no REDUCE_GRAD, no scale |
// | 2.15.0    | + WAIT_SEND_F, WAIT_SEND_B (micro-batch), WAIT_REDUCE_GRAD| at REDUCE_GRAD (L3701)                 |
// |           | (none) (regex L126)                                      |                                         |
//
// Cells: `_Action.__repr__` writes <stage><ACTION>[<micro-batch>]; UNSHARD,
// RESHARD, REDUCE_GRAD and WAIT_REDUCE_GRAD carry no micro-batch ("0UNSHARD").
// `_dump_csv` writes None as an empty cell (compute-only orders only).
// Loaders (`_PipelineScheduleRuntime._load_csv`):
// - compute_only: counts per stage, F == M and B + (I + W) / 2 == M, each
//   backward after its forward (2.6.0 `_validate_schedule` L1004). 2.5.1
//   demands M each of F, B *and* W (L1149), so only split-backward schedules
//   load. From 2.9 a non-compute action is refused (2.9.1 L1786, 2.10.0
//   L1952: REDUCE_GRAD too); torch lowers the file itself (UNSHARD/RESHARD,
//   from 2.10 REDUCE_GRAD after each stage's last B/W (2.11.0 `_add_reduce_grad`
//   L1051), SEND/RECV, in 2.15 the waits), so scale_grads applies once.
// - compute_comms: no empty cell (2.5.1 L1389); from 2.9 the same counts as
//   compute_only. 2.15 adds (L3286-3331, `_validate_send_waits` L1986): each
//   SEND_x has exactly one later WAIT_SEND_x of its (stage, micro-batch) on its
//   rank; each REDUCE_GRAD has its WAIT_REDUCE_GRAD before the rank's next
//   REDUCE_GRAD. Its own lowering (`_add_wait_send` L1929) puts WAIT_SEND_F
//   right after the rank's backward (B or I) of that (stage, micro-batch) and
//   the other waits at the row's end; WAIT_REDUCE_GRAD right after its
//   REDUCE_GRAD (L1691).
// - Since 2.10 GPipe's and 1F1B's compute order ends in REDUCE_GRAD (2.10.0
//   L841, L1061).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

// How B and W read: current (I = input backward, W = weight backward, B = full
// backward; torch 2.6 on) or older (B = input backward, W = weight backward,
// BW = full backward; torch 2.5 with use_full_backward=False, and PyTorch's
// main branch between 2.5 and 2.6, which wrote BW).
enum class TorchDialect { kAuto, kCurrent, kOlder };
std::string_view TorchDialectName(TorchDialect dialect);
std::optional<TorchDialect> TorchDialectFromName(std::string_view name);

// torch's bookkeeping actions: read, checked where they carry a meaning, and
// not kept as ops (the IR has no op for them).
enum class TorchBookkeeping { kUnshard, kReshard, kReduceGrad, kWaitReduceGrad, kWaitSendF, kWaitSendB };
inline constexpr int kNumTorchBookkeeping = 6;
std::string_view TorchBookkeepingName(TorchBookkeeping action);

// A REDUCE_GRAD as read: the stage's gradient reduction point (where torch
// scales its gradients), checked to follow the stage's last backward.
struct TorchReduceGrad {
  int32_t device = 0;
  int32_t stage = 0;
  int line = 0;
  int column = 0;
};

struct TorchImport {
  Schedule schedule;
  TorchDialect dialect = TorchDialect::kCurrent;  // the one used (never kAuto)
  bool had_comm = false;  // the file held SEND/RECV actions (else comm was inserted)
  int overlapped = 0;     // OVERLAP_F_B cells split into their two ops
  int idle_slots = 0;     // empty cells skipped
  std::array<int, kNumTorchBookkeeping> bookkeeping{};  // per TorchBookkeeping
  std::vector<TorchReduceGrad> reduce_grads;           // in file order
};

// Auto-detection: any I token means current; a BW token, or B and W for the
// same (stage, micro-batch) with no I, means older; otherwise current. A
// file without SEND/RECV gets comm inserted (InsertComm); one with them is
// kept as written. Each device that computes gets a final STEP (torch steps
// the optimizer outside its schedule). Ranks are devices; a stage lives on
// the rank whose row holds its compute actions. Bookkeeping actions are
// counted and checked: a REDUCE_GRAD on its stage's rank after all of the
// stage's backward, at most once per stage, for every stage or none; where
// the file has WAITs (torch 2.15), every send has one later wait and every
// REDUCE_GRAD its WAIT_REDUCE_GRAD. Errors name file, line and cell.
Result<TorchImport> ImportTorchCsv(std::string_view text, std::string_view source,
                                   TorchDialect dialect);

// One action as torch writes it ("0F1", "2SEND_B3", "0UNSHARD"), as the IR
// reads it in `dialect` (kAuto reads as current): an op's kind, stage and
// micro-batch (-1 for actions without one), or, for torch's bookkeeping,
// which one and no kind. torch.profiler labels each action the multi-stage
// runtime runs "PP:" and this (schedules.py, _get_profiler_function_name).
struct TorchAction {
  std::optional<OpKind> kind;                   // none for bookkeeping
  std::optional<TorchBookkeeping> bookkeeping;  // none for ops
  int32_t stage = 0;
  int32_t micro_batch = -1;
};
Result<TorchAction> ParseTorchAction(std::string_view cell, TorchDialect dialect);

// A torch release, major.minor (the patch level does not change the format).
struct TorchVersion {
  int major = 2;
  int minor = 15;
  auto operator<=>(const TorchVersion&) const = default;
};
inline constexpr TorchVersion kOldestTorch{2, 5};
inline constexpr TorchVersion kNewestTorch{2, 15};
// "2.11", "2.14.1" or "2.15.0"; kOldestTorch to kNewestTorch.
Result<TorchVersion> ParseTorchVersion(std::string_view text);

struct TorchExportOptions {
  TorchVersion version = kNewestTorch;
  // Only F, I, W, B (2.5: F, B, W): the file for `_load_csv(format=
  // "compute_only")`, which lowers it itself. Otherwise compute and comm for
  // format="compute_comms", with the REDUCE_GRAD (2.10 on) and waits (2.15)
  // that release needs, so that scale_grads applies exactly once.
  bool compute_only = false;
};

struct TorchExportNotes {
  int dropped = 0;       // R, STEP and (before 2.10, or compute-only) ALLREDUCE: no torch action
  int reduce_grads = 0;  // REDUCE_GRAD written
  int waits = 0;         // WAIT_SEND_* and WAIT_REDUCE_GRAD written
  int overlapped = 0;    // paired F/B written as one (F;B)OVERLAP_F_B (torch 2.9 and later)
  std::vector<std::string> warnings;  // what the release will do that the user may not expect
};

// One row per device in the vocabulary and form of `options.version`. Fails
// (with what to do instead) where that release cannot run the schedule: torch
// 2.5 reads B as one kind of backward for a whole schedule, and its
// compute-only loader needs a W for every (stage, micro-batch).
Result<std::string> ExportTorchCsv(const Schedule& schedule, const TorchExportOptions& options,
                                   TorchExportNotes* notes = nullptr);

}  // namespace twinpipe::ir
