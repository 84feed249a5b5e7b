// Recoverable errors as values: a Result<T> holds a T or an Error with a message
// that names its context (file and line, JSON path, device and op).
//
//   Result<Schedule> s = ParseText(text, "pipe.txt");
//   if (!s) { std::cerr << s.error().message; return 2; }
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace twinpipe {

// kBadInput ends a command with exit code 2, kRuntime with exit code 1.
// kAborted: stopped because another part of the run failed (that failure,
// with its own kind, is the one to report); a runtime failure if it is all
// there is.
enum class ErrorKind { kBadInput, kRuntime, kAborted };

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::kBadInput;
};

template <typename T>
using Result = tl::expected<T, Error>;

// Builds the unexpected branch: `return Fail("file.txt:3: expected ...");`
inline tl::unexpected<Error> Fail(std::string message) {
  return tl::unexpected<Error>(Error{std::move(message)});
}

// A runtime failure (out of memory, timeout, device error): exit code 1.
inline tl::unexpected<Error> FailRuntime(std::string message) {
  return tl::unexpected<Error>(Error{std::move(message), ErrorKind::kRuntime});
}

// Stopped because another part of the run failed first.
inline tl::unexpected<Error> FailAborted() { return tl::unexpected<Error>(Error{"aborted", ErrorKind::kAborted}); }

// The exit code for an error: 2 for bad input, 1 otherwise.
inline int ExitCodeOf(const Error& e) { return e.kind == ErrorKind::kBadInput ? 2 : 1; }

}  // namespace twinpipe
