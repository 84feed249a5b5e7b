// The trace reader; an accepted trace must write and read back to itself.
#include <cstdint>
#include <string_view>

#include "fuzz/schedule_checks.h"
#include "traces/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = twinpipe::traces::ReadTraceJson(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (!t) return 0;
  const std::string once = twinpipe::traces::WriteTraceJson(*t);
  auto back = twinpipe::traces::ReadTraceJson(once, "written.json");
  twinpipe::fuzz::Require(back.has_value(), "a written trace reads back");
  twinpipe::fuzz::Require(twinpipe::traces::WriteTraceJson(*back) == once, "the trace round trip is exact");
  return 0;
}
