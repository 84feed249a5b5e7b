// The torch.profiler importer, one rank's trace against a one-device GPipe
// of 4 micro-batches: anything it accepts times each op once, within the
// schedule, in program order (its labels' order on the host; the GPU's
// kernels may run on other streams, so GPU times need only be spans).
#include <cstdint>
#include <string>

#include "fuzz/schedule_checks.h"
#include "ir/builders.h"
#include "traces/torch_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const twinpipe::ir::Schedule schedule = twinpipe::ir::BuildGpipe(1, 4);
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = twinpipe::traces::ImportTorchProfiles({{"fuzz.json", text}}, schedule);
  if (!m) return 0;
  twinpipe::fuzz::Require(m->measured + m->unmeasured == schedule.NumOps(), "every op is measured or not");
  twinpipe::fuzz::Require(static_cast<int>(m->trace.events.size()) == m->measured, "one event per measured op");
  int32_t last_id = -1;
  double last_start = -1e300;
  for (const auto& e : m->trace.events) {
    twinpipe::fuzz::Require(e.id > last_id, "events in op id order");
    twinpipe::fuzz::Require(e.end_s >= e.start_s && e.start_s >= 0, "a span after the first op's start");
    twinpipe::fuzz::Require(m->gpu_time || e.start_s >= last_start, "program order in time");
    last_id = e.id;
    last_start = e.start_s;
  }
  return 0;
}
