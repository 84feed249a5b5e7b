// Passes over a schedule: recompute insertion, send/recv insertion, and
// data-parallel all-reduce insertion. Each leaves ids canonical (Renumber).
//
//   Schedule s = BuildGpipe(4, 8);
//   InsertRecompute(s, RecomputeMode::kExceptLast);
//   InsertComm(s, CommBytes{.activation = {4096, 4096, 4096}});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

// torchgpipe's checkpoint modes: none keeps every activation; full recomputes
// every (stage, micro-batch) before its backward; except-last spares the last
// micro-batch, whose backward follows its forward at once.
// kSelective (Korthikanti et al.): the attention core is re-run inside the
// backward, so the schedule has no R ops (as kNone); the cost model prices
// the re-run and the smaller stash.
enum class RecomputeMode { kNone, kFull, kExceptLast, kSelective };
// True for the modes that add R ops.
inline bool InsertsRecompute(RecomputeMode mode) {
  return mode == RecomputeMode::kFull || mode == RecomputeMode::kExceptLast;
}
std::string_view RecomputeModeName(RecomputeMode mode);
std::optional<RecomputeMode> RecomputeModeFromName(std::string_view name);

// Inserts R(s, m) before the backward (B or I) of (s, m) where the mode asks
// for it and none is there; before a run of receives that precedes the
// backward, so the recompute can overlap the wait for the gradient.
void InsertRecompute(Schedule& schedule, RecomputeMode mode);

// Bytes per micro-batch crossing each stage boundary b (between stage b and
// b+1): activation forward, gradient backward. Empty vectors mean unknown (0).
struct CommBytes {
  std::vector<int64_t> activation;
  std::vector<int64_t> gradient;
};

// When a recompute runs against the gradient its backward receives:
// kOverlapped (torchgpipe) puts R before the gradient's receive, so the
// recompute overlaps the wait; kInBackward (Megatron-LM's activation
// checkpointing, which re-runs the forward inside the backward call) receives
// the gradient first.
enum class RecomputeTiming { kOverlapped, kInBackward };
std::string_view RecomputeTimingName(RecomputeTiming timing);
std::optional<RecomputeTiming> RecomputeTimingFromName(std::string_view name);

// Adds SEND_F/RECV_F and SEND_B/RECV_B between stages placed on different
// devices (none between stages on one device). A send follows its producer at
// once; receives from one peer are posted in that peer's send order (FIFO, as
// NCCL requires), each as late as that order allows before its consumer (an
// activation's F; a gradient's B or I, or its R with kInBackward). A paired
// F and its B or I run as one (torch's OVERLAP_F_B): what either receives
// comes before the F, what either sends after the backward. The schedule
// must hold no comm ops yet.
Result<void> InsertComm(Schedule& schedule, const CommBytes& bytes,
                        RecomputeTiming timing = RecomputeTiming::kOverlapped);

// With replicas > 1, adds ALLREDUCE(s) after the last backward op of stage s
// (and the sends that follow it), carrying `stage_bytes[s]` gradient bytes.
void InsertAllReduce(Schedule& schedule, const std::vector<int64_t>& stage_bytes);

}  // namespace twinpipe::ir
