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

struct Error {
  std::string message;
};

template <typename T>
using Result = tl::expected<T, Error>;

// Builds the unexpected branch: `return Fail("file.txt:3: expected ...");`
inline tl::unexpected<Error> Fail(std::string message) {
  return tl::unexpected<Error>(Error{std::move(message)});
}

}  // namespace twinpipe
