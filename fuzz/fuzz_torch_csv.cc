// The torch.distributed.pipelining CSV importer (both dialects, auto-detected).
#include <cstdint>
#include <string_view>

#include "fuzz/schedule_checks.h"
#include "ir/torch_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = twinpipe::ir::ImportTorchCsv(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.csv",
                                        twinpipe::ir::TorchDialect::kAuto);
  if (r) twinpipe::fuzz::CheckSchedule(r->schedule);
  return 0;
}
