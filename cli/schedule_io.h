// The files the commands read and write (api/schedule_io.h), by their names
// in the command line's namespace.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "api/schedule_io.h"
#include "cli/fail.h"

namespace twinpipe::cli {

using api::LoadedSchedule;
using api::LoadSchedule;
using api::LoadTrace;
using api::ReadFile;
using api::WriteOutput;

// Where a command prints its own report (its table or --json): stdout, or
// stderr when one of its output files, given as (option, path), is "-"
// (stdout), which then carries that file alone so that it reads back. Two
// files on "-" are refused.
inline Result<std::FILE*> ReportStream(std::initializer_list<std::pair<std::string_view, std::string_view>> files) {
  std::string_view on_stdout;
  for (const auto& [option, path] : files) {
    if (path != "-") continue;
    if (!on_stdout.empty()) {
      return Fail(fmt::format("{} - and {} - both write to stdout: give one of them a file", on_stdout, option));
    }
    on_stdout = option;
  }
  return on_stdout.empty() ? stdout : stderr;
}

}  // namespace twinpipe::cli
