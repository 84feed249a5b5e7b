// What every schedule harness does with a schedule a parser accepted: it
// must print and re-parse to itself, and when it verifies (and is small) the
// simulator must finish it. Any failure aborts, which libFuzzer reports.
#pragma once

#include <cstdlib>
#include <cstdio>

#include "ir/text_format.h"
#include "ir/verifier.h"
#include "simulate/engine.h"

namespace twinpipe::fuzz {

inline void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz check failed: %s\n", what);
    std::abort();
  }
}

inline void CheckSchedule(const ir::Schedule& s) {
  if (s.NumOps() > 20000) return;
  const std::string text = ir::PrintText(s);
  auto again = ir::ParseText(text, "printed");
  Require(again.has_value(), "a parsed schedule prints to text that parses");
  Require(ir::PrintText(*again) == text, "the text round trip is exact");
  if (!ir::Verify(s).empty()) return;
  auto r = simulate::Simulate(s, cost::UniformCosts(s, 1e-3, 2e-3));
  Require(r.has_value(), "a verified schedule simulates");
}

}  // namespace twinpipe::fuzz
