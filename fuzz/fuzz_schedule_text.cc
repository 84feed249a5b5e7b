// The IR text parser, then the printer, verifier and simulator on what it accepts.
#include <cstdint>
#include <string_view>

#include "fuzz/schedule_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto s = twinpipe::ir::ParseText(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.txt");
  if (s) twinpipe::fuzz::CheckSchedule(*s);
  return 0;
}
