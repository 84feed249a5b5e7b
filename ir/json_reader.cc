#include "ir/json_reader.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace twinpipe::ir::json {

Reader::Reader(std::string source, std::string base) : source_(std::move(source)), base_(std::move(base)) {}

void Reader::Fail(std::string_view path, std::string_view what) const {
  const std::string full = base_ + std::string(path);
  throw ReadError{fmt::format("{}: {}: {}", source_, full.empty() ? "/" : full, what)};
}

namespace {

// Where the parser is: per open object its keys so far, per open array the
// index of its element; a key given twice in one object is refused (the
// parser would keep the last silently).
class Nesting {
 public:
  // The JSON path of the member or element being read.
  std::string Path() const {
    std::string path;
    for (const Level& level : levels_) {
      if (level.object) {
        if (!level.keys.empty()) path += "/" + level.keys.back();
      } else if (level.index >= 0) {
        path += "/" + std::to_string(level.index);
      }
    }
    return path;
  }
  // Before a value (or an object or array) starts: the next element of an array.
  void Element() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
  }
  void Open(bool object) { levels_.push_back({object, {}, -1}); }
  void Close() { levels_.pop_back(); }
  // False when the open object has the key already.
  bool Key(const std::string& key) {
    std::vector<std::string>& keys = levels_.back().keys;
    const bool fresh = std::find(keys.begin(), keys.end(), key) == keys.end();
    keys.push_back(key);
    return fresh;
  }

 private:
  struct Level {
    bool object;
    std::vector<std::string> keys;  // an object's, in order (the last is the member being read)
    int64_t index;                  // an array's element being read
  };
  std::vector<Level> levels_;
};

}  // namespace

Json Reader::Parse(std::string_view text) const {
  Nesting at;
  auto check = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        at.Element();
        at.Open(event == Json::parse_event_t::object_start);
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        at.Close();
        break;
      case Json::parse_event_t::key:
        if (!at.Key(parsed.get<std::string>())) {
          Fail(at.Path(), "this key is given twice in its object (expected each key once)");
        }
        break;
      case Json::parse_event_t::value:
        at.Element();
        break;
    }
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const Json::exception& e) {
    throw ReadError{fmt::format("{}: not valid JSON: {}", source_, e.what())};
  }
}

void Reader::Format(const Json& doc, std::string_view format) const {
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != format) {
    Fail("/format", fmt::format("expected \"{}\"", format));
  }
}

const Json& Reader::Object(const Json& parent, const std::string& key, const std::string& path) const {
  auto it = parent.find(key);
  if (it == parent.end()) Fail(path, fmt::format("missing section '{}'", key));
  if (!it->is_object()) Fail(path + "/" + key, fmt::format("expected an object, got {}", it->type_name()));
  return *it;
}

void Reader::Keys(const Json& obj, const std::string& path, std::span<const std::string_view> allowed) const {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    std::vector<std::string_view> names(allowed.begin(), allowed.end());
    std::sort(names.begin(), names.end());
    Fail(path + "/" + it.key(), fmt::format("unknown key (expected one of {})", fmt::join(names, ", ")));
  }
}

int64_t Reader::Int(const Json& obj, const std::string& key, const std::string& path, int64_t lo, int64_t hi,
                    std::optional<int64_t> fallback) const {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (fallback) return *fallback;
    Fail(path, fmt::format("missing key '{}' (an integer from {} to {})", key, lo, hi));
  }
  return CheckInt(*it, path + "/" + key, lo, hi);
}

int64_t Reader::CheckInt(const Json& v, const std::string& path, int64_t lo, int64_t hi) const {
  if (!v.is_number_integer()) Fail(path, fmt::format("expected an integer, got {}", v.dump()));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    Fail(path, fmt::format("expected an integer from {} to {}, got {}", lo, hi, v.dump()));
  }
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) Fail(path, fmt::format("expected an integer from {} to {}, got {}", lo, hi, n));
  return n;
}

double Reader::Number(const Json& obj, const std::string& key, const std::string& path, double lo, double hi,
                      std::optional<double> fallback, bool lo_open) const {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (fallback) return *fallback;
    Fail(path, fmt::format("missing key '{}' (a number)", key));
  }
  return CheckNumber(*it, path + "/" + key, lo, hi, lo_open);
}

double Reader::CheckNumber(const Json& v, const std::string& path, double lo, double hi, bool lo_open) const {
  if (!v.is_number()) Fail(path, fmt::format("expected a number, got {}", v.dump()));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
    Fail(path, fmt::format("expected a number {} {} and at most {}, got {}", lo_open ? ">" : ">=", lo, hi, v.dump()));
  }
  return x;
}

const Json& Reader::Array(const Json& parent, const std::string& key, const std::string& path, bool required) const {
  static const Json kEmpty = Json::array();
  auto it = parent.find(key);
  if (it == parent.end()) {
    if (!required) return kEmpty;
    Fail(path, fmt::format("missing key '{}' (an array)", key));
  }
  if (!it->is_array()) Fail(path + "/" + key, fmt::format("expected an array, got {}", it->type_name()));
  return *it;
}

int64_t Reader::IntAt(const Json& array, size_t index, const std::string& path, int64_t lo, int64_t hi) const {
  return CheckInt(array.at(index), fmt::format("{}/{}", path, index), lo, hi);
}

double Reader::NumberAt(const Json& array, size_t index, const std::string& path, double lo, double hi) const {
  return CheckNumber(array.at(index), fmt::format("{}/{}", path, index), lo, hi, false);
}

std::string Reader::String(const Json& obj, const std::string& key, const std::string& path,
                           const std::vector<std::string>& choices, std::optional<std::string> fallback) const {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (fallback) return *fallback;
    Fail(path, choices.empty() ? fmt::format("missing key '{}' (a string)", key)
                               : fmt::format("missing key '{}' (one of {})", key, fmt::join(choices, ", ")));
  }
  const std::string p = path + "/" + key;
  if (!it->is_string()) Fail(p, fmt::format("expected a string, got {}", it->dump()));
  std::string v = it->get<std::string>();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end()) {
    Fail(p, fmt::format("'{}' is not one of {}", v, fmt::join(choices, ", ")));
  }
  return v;
}

bool Reader::Bool(const Json& obj, const std::string& key, const std::string& path, bool fallback) const {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (!it->is_boolean()) Fail(path + "/" + key, fmt::format("expected true or false, got {}", it->dump()));
  return it->get<bool>();
}

}  // namespace twinpipe::ir::json
