// The lines of a text, one at a time, numbered from 1 for messages that name
// them ("file:line: ..."), each without its '\n'. A last line without one
// counts too. The schedule text, torch CSV and run-table readers share it.
//
//   Lines lines(text);
//   for (std::string_view line; lines.Next(line);) { ... lines.number() ... }
#pragma once

#include <cstddef>
#include <string_view>

namespace twinpipe::ir {

class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  bool Next(std::string_view& line) {
    if (begin_ >= text_.size()) return false;
    size_t end = text_.find('\n', begin_);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(begin_, end - begin_);
    begin_ = end + 1;
    ++number_;
    return true;
  }
  int number() const { return number_; }

 private:
  std::string_view text_;
  size_t begin_ = 0;
  int number_ = 0;
};

}  // namespace twinpipe::ir
