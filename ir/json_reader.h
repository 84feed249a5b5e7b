// The one reader of twinpipe's JSON files (configs, schedules, tables of
// runs): each accessor checks a member's presence, type and range, and the
// first problem ends the read with "<source>: <JSON path>: <what was
// expected>". A Reader throws that problem (a ReadError); TryRead runs a
// read and turns it into a bad-input Error, so no exception leaves it.
//
//   Result<int64_t> stages = TryRead([&] { Reader r("s.json"); Json doc = r.Parse(text);
//                                           return r.Int(doc, "stages", "", 1, 64); });
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/name_table.h"
#include "ir/result.h"

namespace twinpipe::ir::json {

using Json = nlohmann::json;

// The first problem a Reader found, message complete; TryRead catches it.
struct ReadError {
  std::string message;
};

// Paths are JSON pointers relative to the document read ("" is its root,
// "/pipeline" a member); an accessor's `path` is the object's, and its
// messages name the member (path + "/" + key) where the member is at fault.
class Reader {
 public:
  // `source` names the file, and the line for line-based formats
  // ("runs.jsonl:3"). `base` is the JSON path of the document inside it
  // (a table of runs reads each line's config at "/config").
  explicit Reader(std::string source, std::string base = "");

  const std::string& source() const { return source_; }

  // Ends the read: "<source>: <base + path, or / for the root>: <what>".
  [[noreturn]] void Fail(std::string_view path, std::string_view what) const;

  // The document, or "<source>: not valid JSON: <the parser's message>".
  Json Parse(std::string_view text) const;

  // The document's kind: an object whose "format" is `format`, else
  // "<source>: /format: expected "<format>"".
  void Format(const Json& doc, std::string_view format) const;

  // A required member that is an object (a section of the file).
  const Json& Object(const Json& parent, const std::string& key, const std::string& path) const;

  // Refuses a member not listed in `allowed` (the message lists them sorted).
  void Keys(const Json& obj, const std::string& path, std::span<const std::string_view> allowed) const;
  void Keys(const Json& obj, const std::string& path, std::initializer_list<std::string_view> allowed) const {
    Keys(obj, path, std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }

  // An integer in [lo, hi]; `fallback` when absent (required without one).
  int64_t Int(const Json& obj, const std::string& key, const std::string& path, int64_t lo, int64_t hi,
              std::optional<int64_t> fallback = std::nullopt) const;

  // A finite number in [lo, hi] ((lo, hi] with lo_open); `fallback` when absent.
  double Number(const Json& obj, const std::string& key, const std::string& path, double lo, double hi,
                std::optional<double> fallback = std::nullopt, bool lo_open = false) const;

  // A string, one of `choices` unless they are empty; `fallback` when absent.
  std::string String(const Json& obj, const std::string& key, const std::string& path,
                     const std::vector<std::string>& choices, std::optional<std::string> fallback) const;

  // A member that is an array; absent: an empty one when `required` is false.
  const Json& Array(const Json& parent, const std::string& key, const std::string& path, bool required = true) const;
  // Element `index` of `array` (at `path`): an integer in [lo, hi], a
  // finite number in [lo, hi].
  int64_t IntAt(const Json& array, size_t index, const std::string& path, int64_t lo, int64_t hi) const;
  double NumberAt(const Json& array, size_t index, const std::string& path, double lo, double hi) const;

  // true or false; `fallback` when absent.
  bool Bool(const Json& obj, const std::string& key, const std::string& path, bool fallback) const;

  // A name from `names` (ir/name_table.h), parsed into its value; `fallback`
  // when absent. Messages as String's, with the table's names as choices.
  template <typename T, size_t N>
  T Enum(const Json& obj, const std::string& key, const std::string& path, const NameTable<T, N>& names,
         std::type_identity_t<std::optional<T>> fallback) const {
    std::optional<std::string> fallback_name;
    if (fallback) fallback_name = std::string(NameOf(names, *fallback));
    return *FromName(names, String(obj, key, path, Names(names), std::move(fallback_name)));
  }

 private:
  int64_t CheckInt(const Json& v, const std::string& path, int64_t lo, int64_t hi) const;
  double CheckNumber(const Json& v, const std::string& path, double lo, double hi, bool lo_open) const;

  std::string source_;
  std::string base_;
};

// Runs `read` (a function reading with Readers) and returns its result, or
// the first problem it met as a bad-input Error.
template <typename F>
auto TryRead(F&& read) -> Result<std::invoke_result_t<F&>> {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      read();
      return {};
    } else {
      return read();
    }
  } catch (const ReadError& e) {
    return twinpipe::Fail(e.message);
  }
}

}  // namespace twinpipe::ir::json
