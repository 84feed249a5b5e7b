// Reading and writing files for the command line and the Python module: whole-file I/O, traces, and
// the three formats (twinpipe text, twinpipe JSON, torch CSV), chosen by flag
// or by the file's extension.
//
//   auto loaded = LoadSchedule("pipe.csv", "auto", "auto");
//   if (!loaded) { fmt::print(stderr, "{}\n", loaded.error().message); return 2; }
#pragma once

#include <string>

#include "ir/result.h"
#include "ir/schedule.h"
#include "traces/trace.h"

namespace twinpipe::api {

Result<std::string> ReadFile(const std::string& path);
// Writes `text` to `path`, or to stdout when path is empty or "-"; a file
// that cannot be written is a runtime failure.
Result<void> WriteOutput(const std::string& path, const std::string& text);

struct LoadedSchedule {
  ir::Schedule schedule;
  std::string format;  // "text", "json" or "torch-csv"
  std::string note;    // e.g. "torch CSV, older dialect (detected), comm inserted"
};

// format: auto|text|json|torch-csv (auto: .json -> json, .csv -> torch-csv,
// else text); dialect: auto|current|older (torch CSV only: another
// dialect than auto for a file read as text or JSON is bad input).
Result<LoadedSchedule> LoadSchedule(const std::string& path, const std::string& format,
                                    const std::string& dialect);

// Reads a trace file (native JSON); errors name the file and JSON path.
Result<traces::Trace> LoadTrace(const std::string& path);

}  // namespace twinpipe::api
