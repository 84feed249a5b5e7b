#include "api/schedule_io.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/json_format.h"
#include "ir/text_format.h"
#include "ir/torch_csv.h"

namespace twinpipe::api {

Result<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Fail(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Fail(fmt::format("{}: read failed", path));
  return buffer.str();
}

Result<void> WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    return {};
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return FailRuntime(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  out << text;
  out.close();
  if (!out) return FailRuntime(fmt::format("{}: write failed", path));
  return {};
}

Result<traces::Trace> LoadTrace(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  return traces::ReadTraceJson(*text, path);
}

Result<LoadedSchedule> LoadSchedule(const std::string& path, const std::string& format,
                                    const std::string& dialect) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  std::string chosen = format;
  if (chosen == "auto") {
    auto ends_with = [&](std::string_view ext) {
      return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
    };
    chosen = ends_with(".json") ? "json" : ends_with(".csv") ? "torch-csv" : "text";
  }
  if (dialect != "auto" && chosen != "torch-csv") {
    // It would be ignored: only a torch CSV has dialects.
    return Fail(fmt::format("{}: --dialect {} reads torch CSV files, and this one is read as {}{} (--format torch-csv "
                            "reads it as torch CSV)",
                            path, dialect, chosen == "json" ? "twinpipe JSON" : "twinpipe text",
                            format == "auto" ? " by its extension" : ""));
  }
  LoadedSchedule loaded;
  loaded.format = chosen;
  if (chosen == "text") {
    auto s = ir::ParseText(*text, path);
    if (!s) return tl::unexpected(s.error());
    loaded.schedule = std::move(*s);
    loaded.note = "twinpipe text";
  } else if (chosen == "json") {
    auto s = ir::ParseJson(*text, path);
    if (!s) return tl::unexpected(s.error());
    loaded.schedule = std::move(*s);
    loaded.note = "twinpipe JSON";
  } else if (chosen == "torch-csv") {
    auto d = ir::TorchDialectFromName(dialect);
    if (!d) {
      return Fail(fmt::format("--dialect '{}': expected auto, current or older", dialect));
    }
    auto imported = ir::ImportTorchCsv(*text, path, *d);
    if (!imported) return tl::unexpected(imported.error());
    loaded.schedule = std::move(imported->schedule);
    loaded.note = fmt::format("torch CSV, {} dialect ({}), {}", ir::TorchDialectName(imported->dialect),
                              *d == ir::TorchDialect::kAuto ? "detected" : "forced",
                              imported->had_comm ? "comm as written" : "comm inserted");
    if (imported->overlapped) loaded.note += fmt::format(", {} OVERLAP_F_B split", imported->overlapped);
    if (imported->idle_slots) loaded.note += fmt::format(", {} idle slots skipped", imported->idle_slots);
    std::vector<std::string> read;
    for (int k = 0; k < ir::kNumTorchBookkeeping; ++k) {
      if (imported->bookkeeping[k]) {
        read.push_back(fmt::format("{} {}", imported->bookkeeping[k],
                                   ir::TorchBookkeepingName(static_cast<ir::TorchBookkeeping>(k))));
      }
    }
    if (!read.empty()) loaded.note += fmt::format(", torch bookkeeping read and not kept as ops: {}", fmt::join(read, ", "));
    if (!imported->reduce_grads.empty()) loaded.note += ", each REDUCE_GRAD after its stage's last backward";
  } else {
    return Fail(fmt::format("--format '{}': expected auto, text, json or torch-csv", format));
  }
  return loaded;
}

}  // namespace twinpipe::api
