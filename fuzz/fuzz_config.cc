// The config loader: any bytes end in a config or a message, never a crash.
#include <cstdint>
#include <string_view>

#include "cost_models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = twinpipe::cost::LoadConfig(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (!c && c.error().message.empty()) __builtin_trap();
  return 0;
}
