// torch.profiler traces of a torch.distributed.pipelining step, one Chrome
// trace per rank (`export_chrome_trace`, plain or gzipped), read as the
// measured trace of the schedule that ran: each op the profile labels gets
// its start and end, so `compare` can hold a prediction of that schedule
// against it.
//
// What torch labels (torch/distributed/pipelining/schedules.py, 2.6 to 2.15):
// the multi-stage runtime wraps every action of its program in
// record_function("PP:<action>") ("PP:0F1", "PP:2SEND_B3", "PP:0UNSHARD");
// the single-stage schedules (ScheduleGPipe, Schedule1F1B) label their
// compute "Forward <i>" and "Backward <i>" and leave their transfers
// unlabelled. Events of category user_annotation give each op its range on
// the host; where a rank's file has the GPU's work (ProfilerActivity.CUDA:
// kernel, gpu_memcpy, gpu_memset events), an op's time is the span of the
// work launched, from any thread, while its label was open (an op that
// launched none takes no time, where the op before it ended). The optimizer step runs outside the schedule: STEP ops stay
// unmeasured, as do the transfers torch does not label.
//
//   auto m = ImportTorchProfiles({{"rank0.json.gz", text0}, {"rank1.json.gz", text1}}, schedule);
//   m->trace;  // events of the measured ops only, op ids the schedule's
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/result.h"
#include "ir/schedule.h"
#include "traces/trace.h"

namespace twinpipe::traces {

struct TorchProfileImport {
  Trace trace;          // source "torch.profiler"; the measured ops, in op id order
  int measured = 0;     // schedule ops with a labelled event
  int unmeasured = 0;   // schedule ops without one (STEP, unlabelled transfers)
  int bookkeeping = 0;  // UNSHARD, RESHARD, REDUCE_GRAD, waits: read and skipped
  bool gpu_time = false;  // some rank's times are its GPU's (the profile has its kernels)
  int no_gpu_work = 0;     // of the measured ops in such files, those that launched no GPU work: no time, at the
                          // GPU end of the op before them (the host's range where none came before)
};

// `files`: (name, contents) per rank, plain JSON or gzip. A file's rank is
// its distributedInfo.rank, or its place in the list; ranks are the
// schedule's devices. Bad input (not a Chrome trace, ranks missing or
// repeated, a label that is no op of its rank's program, an op labelled
// twice: more than one step profiled) fails naming the file and JSON path.
Result<TorchProfileImport> ImportTorchProfiles(const std::vector<std::pair<std::string, std::string>>& files,
                                               const ir::Schedule& schedule);

// A file's contents as text: gunzipped where it starts with gzip's magic.
Result<std::string> Gunzipped(std::string bytes, const std::string& name);

}  // namespace twinpipe::traces
