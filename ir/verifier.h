// The schedule verifier: counts, order, send/recv pairing and bytes,
// placement, FIFO order per device pair, and deadlock freedom under blocking
// point-to-point semantics (a receive blocks its device until the matching
// send is issued; sends do not block). Run after parsing, after every pass,
// and before simulating or executing.
//
//   std::vector<Diagnostic> d = Verify(schedule);
//   for (auto& x : d) std::cerr << FormatDiagnostic(schedule, x) << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/schedule.h"

namespace twinpipe::ir {

struct Diagnostic {
  int32_t device = -1;    // -1: about the schedule as a whole
  int32_t position = -1;  // index in the device's program; -1: about the device
  std::string message;

  bool operator==(const Diagnostic&) const = default;
};

// Every problem found, in a deterministic order; empty when the schedule is
// valid. FIFO matching and the deadlock check run only when every op is
// well-formed, counted, ordered and paired.
std::vector<Diagnostic> Verify(const Schedule& schedule);

// "device 1, position 4 (1B0): backward before its forward 1F0 (position 6)".
std::string FormatDiagnostic(const Schedule& schedule, const Diagnostic& diagnostic);

}  // namespace twinpipe::ir
