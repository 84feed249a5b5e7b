// `twinpipe verify`: read a schedule (text, JSON or torch CSV) and run the
// verifier; a one-line summary when valid, every diagnostic when not.
#include <array>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/schedule_io.h"
#include "ir/verifier.h"

namespace twinpipe::cli {
namespace {

struct VerifyOptions {
  std::string file;
  std::string format = "auto";
  std::string dialect = "auto";
};

int Run(const VerifyOptions& o) {
  auto loaded = LoadSchedule(o.file, o.format, o.dialect);
  if (!loaded) return Fail("verify", loaded.error());
  const ir::Schedule& s = loaded->schedule;
  const auto diagnostics = ir::Verify(s);
  if (!diagnostics.empty()) {
    for (const auto& d : diagnostics) {
      fmt::print(stderr, "{}: {}\n", o.file, ir::FormatDiagnostic(s, d));
    }
    fmt::print(stderr, "{}: invalid ({}): {} problem{}\n", o.file, loaded->note, diagnostics.size(),
               diagnostics.size() == 1 ? "" : "s");
    return kExitBadInput;
  }
  std::array<int64_t, ir::kNumOpKinds> counts{};
  for (const auto& program : s.programs) {
    for (const auto& op : program) ++counts[static_cast<int>(op.kind)];
  }
  std::vector<std::string> parts;
  for (int k = 0; k < ir::kNumOpKinds; ++k) {
    if (counts[k]) parts.push_back(fmt::format("{} {}", counts[k], ir::OpKindName(static_cast<ir::OpKind>(k))));
  }
  fmt::print("{}: valid ({}): {} stages, {} micro-batches, {} devices, {} replica{}, {} ops ({})\n",
             o.file, loaded->note, s.num_stages, s.num_micro_batches, s.num_devices, s.replicas,
             s.replicas == 1 ? "" : "s",
             s.NumOps(), fmt::join(parts, ", "));
  return kExitOk;
}

}  // namespace

void AddVerify(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand("verify", "Check a schedule file: counts, order, pairing, "
                                               "placement, FIFO order and deadlock freedom");
  cmd->add_option("file", o->file, "schedule file (.txt twinpipe text, .json, .csv torch)")->required();
  cmd->add_option("--format", o->format, "input format")
      ->check(CLI::IsMember({"auto", "text", "json", "torch-csv"}));
  cmd->add_option("--dialect", o->dialect, "torch CSV dialect (auto detects)")
      ->check(CLI::IsMember({"auto", "current", "older"}));
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
