#include "ir/pipeline.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/verifier.h"

namespace twinpipe::ir {

Result<void> VerifyOrFail(const Schedule& s, std::string_view what) {
  const auto diagnostics = Verify(s);
  if (diagnostics.empty()) return {};
  std::string all;
  for (size_t i = 0; i < std::min<size_t>(diagnostics.size(), 20); ++i) {
    all += "\n  " + FormatDiagnostic(s, diagnostics[i]);
  }
  return Fail(fmt::format("{} does not verify:{}", what, all));
}

Result<void> CompletePipeline(Schedule& s, const PipelineOptions& o) {
  InsertRecompute(s, o.recompute);
  if (auto ok = InsertComm(s, o.comm, o.recompute_timing); !ok) {
    return FailRuntime(fmt::format("{}: {}", o.what, ok.error().message));
  }
  InsertAllReduce(s, o.gradient_bytes);
  if (!o.verify) return {};
  if (auto ok = VerifyOrFail(s, o.what); !ok) return FailRuntime(ok.error().message);
  return {};
}

}  // namespace twinpipe::ir
