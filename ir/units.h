// How twinpipe writes byte counts for people (one home for every report,
// message and picture):
//
//   GiB(3 << 29);    // "1.500 GiB": tables of peaks, fixed unit and width
//   Bytes(5 << 20);  // "5.0 MiB": labels and messages, the unit that fits
#pragma once

#include <string>

#include <fmt/format.h>

namespace twinpipe {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

inline std::string GiB(double bytes) { return fmt::format("{:.3f} GiB", bytes / kBytesPerGiB); }

inline std::string Bytes(double bytes) {
  if (bytes >= kBytesPerGiB) return fmt::format("{:.2f} GiB", bytes / kBytesPerGiB);
  if (bytes >= 1 << 20) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  return fmt::format("{:.0f} KiB", bytes / 1024);
}

}  // namespace twinpipe
