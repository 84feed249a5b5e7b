// The calibration reader; an accepted file must write and read back to itself.
#include <cstdint>
#include <string_view>

#include "fuzz/schedule_checks.h"
#include "cost_models/calibration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = twinpipe::cost::ReadCalibration(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (!c) return 0;
  const std::string once = twinpipe::cost::WriteCalibration(*c);
  auto back = twinpipe::cost::ReadCalibration(once, "written.json");
  twinpipe::fuzz::Require(back.has_value(), "a written calibration reads back");
  twinpipe::fuzz::Require(twinpipe::cost::WriteCalibration(*back) == once, "the calibration round trip is exact");
  return 0;
}
