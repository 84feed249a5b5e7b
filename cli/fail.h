// How a subcommand ends on an error: it prints "twinpipe <command>: <message>"
// on stderr and exits with the code of the error's kind (2 bad input, 1
// runtime failure; DESIGN.md section 8).
//
//   if (!config) return Fail("simulate", config.error());
//   return Fail("schedule", {"give a CONFIG, or both --stages and --microbatches"});  // bad input
#pragma once

#include <string_view>

#include <fmt/format.h>

#include "ir/result.h"

namespace twinpipe::cli {

// twinpipe::Fail (an error value for a Result) stays callable by its name here.
using twinpipe::Fail;

// Exit codes of every subcommand (DESIGN.md section 8).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitBadInput = 2;

// Prints the error as the command's and returns its exit code.
inline int Fail(std::string_view command, const Error& error) {
  fmt::print(stderr, "twinpipe {}: {}\n", command, error.message);
  return ExitCodeOf(error);
}

}  // namespace twinpipe::cli
