#include "ir/text_format.h"

#include <charconv>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "ir/lines.h"

namespace twinpipe::ir {
namespace {

constexpr std::string_view kTokenForm =
    "expected <stage><KIND><micro-batch>[@bytes] such as 2F0 or 0SEND_F1@4096, "
    "<stage>F<micro-batch>+ (overlapped with the next B or I), <stage>ALLREDUCE[@bytes], or STEP";

bool ParseInt(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string_view> SplitWords(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) words.push_back(line.substr(i, j - i));
    i = j;
  }
  return words;
}

}  // namespace

Result<Op> ParseToken(std::string_view token) {
  auto bad = [&](std::string_view why) {
    return Fail(fmt::format("bad token '{}': {}; {}", token, why, kTokenForm));
  };
  if (token == "STEP") return Op{.kind = OpKind::kStep};
  std::string_view rest = token;
  const bool paired = rest.ends_with('+');
  if (paired) rest.remove_suffix(1);
  int64_t bytes = 0;
  if (auto at = rest.find('@'); at != std::string_view::npos) {
    if (!ParseInt(rest.substr(at + 1), bytes) || bytes < 0) {
      return bad("bytes after '@' must be a non-negative integer");
    }
    rest = rest.substr(0, at);
  }
  size_t i = 0;
  while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
  size_t j = i;
  while (j < rest.size() && (std::isupper(static_cast<unsigned char>(rest[j])) || rest[j] == '_')) ++j;
  int64_t stage = 0, micro_batch = -1;
  if (!ParseInt(rest.substr(0, i), stage) || stage > INT32_MAX) return bad("no stage index");
  auto kind = OpKindFromName(rest.substr(i, j - i));
  if (!kind || *kind == OpKind::kStep) {
    return bad(fmt::format("unknown op kind '{}'", rest.substr(i, j - i)));
  }
  if (HasMicroBatch(*kind)) {
    if (!ParseInt(rest.substr(j), micro_batch) || micro_batch > INT32_MAX) {
      return bad("no micro-batch index");
    }
  } else if (j != rest.size()) {
    return bad(fmt::format("{} takes no micro-batch", OpKindName(*kind)));
  }
  if (bytes != 0 && !IsComm(*kind) && *kind != OpKind::kAllReduce) {
    return bad("only comm and all-reduce ops carry bytes");
  }
  if (paired && *kind != OpKind::kForward) return bad("only a forward pairs with a backward ('+')");
  return Op{.kind = *kind,
            .stage = static_cast<int32_t>(stage),
            .micro_batch = static_cast<int32_t>(micro_batch),
            .bytes = bytes,
            .paired = paired};
}

void AssignPeers(Schedule& s) {
  const int32_t K = static_cast<int32_t>(s.placement.size());
  for (auto& program : s.programs) {
    for (Op& op : program) {
      if (!IsComm(op.kind)) continue;
      const bool up = op.kind == OpKind::kSendF || op.kind == OpKind::kRecvB;
      const int32_t other = up ? op.stage + 1 : op.stage - 1;
      op.peer = other >= 0 && other < K ? s.placement[other] : -1;
    }
  }
}

Result<void> InferShape(Schedule& s) {
  int64_t K = 0, M = 0;
  std::string last_stage;  // where the largest stage is named: "5F0 on device 1"
  for (size_t d = 0; d < s.programs.size(); ++d) {
    for (const Op& op : s.programs[d]) {
      if (op.stage + 1 > K) last_stage = fmt::format("{} on device {}", OpToken(op), d);
      K = std::max(K, int64_t{op.stage} + 1);
      M = std::max(M, int64_t{op.micro_batch} + 1);
    }
  }
  if (K > kMaxShape || M > kMaxShape) {
    return Fail(fmt::format("stage {} or micro-batch {} is beyond {}, the most a schedule holds", K - 1, M - 1,
                            kMaxShape));
  }
  if (K == 0 || M == 0) {
    return Fail("no op names a stage and micro-batch, so the shape is unknown: add a header line "
                "(stages= microbatches= devices= replicas= placement=)");
  }
  s.num_stages = static_cast<int32_t>(K);
  s.num_micro_batches = static_cast<int32_t>(M);
  s.num_devices = static_cast<int32_t>(s.programs.size());
  s.placement.assign(K, -1);
  for (bool comm : {false, true}) {
    for (int32_t d = 0; d < s.num_devices; ++d) {
      for (const Op& op : s.programs[d]) {
        if (op.stage >= 0 && IsComm(op.kind) == comm && s.placement[op.stage] < 0) {
          s.placement[op.stage] = d;
        }
      }
    }
  }
  for (int32_t st = 0; st < s.num_stages; ++st) {
    if (s.placement[st] < 0) {
      return Fail(fmt::format("stage {} has no ops, so its device is unknown (stages run 0..{}, the last named by {})",
                              st, K - 1, last_stage));
    }
  }
  return {};
}

std::string PrintText(const Schedule& s) {
  std::string out = "# twinpipe schedule v1\n";
  out += fmt::format("stages={} microbatches={} devices={} replicas={} placement={}\n",
                     s.num_stages, s.num_micro_batches, s.num_devices, s.replicas,
                     fmt::join(s.placement, ","));
  for (const auto& program : s.programs) {
    if (program.empty()) {
      out += "-\n";
      continue;
    }
    for (size_t i = 0; i < program.size(); ++i) {
      if (i) out += ' ';
      out += OpToken(program[i]);
      if (program[i].paired) out += '+';
    }
    out += '\n';
  }
  return out;
}

Result<Schedule> ParseText(std::string_view text, std::string_view source) {
  Schedule s;
  bool have_header = false;
  bool have_devices = false;
  bool have_placement = false;
  Lines lines(text);
  for (std::string_view line; lines.Next(line);) {
    const int line_no = lines.number();
    // The writer's version line: another version than 1 is not read as this one.
    if (constexpr std::string_view kVersion = "# twinpipe schedule v"; line.starts_with(kVersion)) {
      const auto rest = SplitWords(line.substr(kVersion.size()));
      const std::string_view version = rest.empty() ? std::string_view{} : rest[0];
      if (version != "1") {
        return Fail(fmt::format("{}:{}: twinpipe schedule version '{}': this twinpipe reads version 1", source,
                                line_no, version));
      }
    }
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto words = SplitWords(line);
    if (words.empty()) continue;
    auto where = [&](std::string_view msg) {
      return Fail(fmt::format("{}:{}: {}", source, line_no, msg));
    };
    if (words[0].find('=') != std::string_view::npos) {
      if (have_header || !s.programs.empty()) {
        return where("header line (stages=...) must come once, before the device lines");
      }
      have_header = true;
      bool seen[4] = {false, false, false, false};
      for (auto word : words) {
        auto eq = word.find('=');
        if (eq == std::string_view::npos) {
          return where(fmt::format("'{}' in the header: expected key=value", word));
        }
        auto key = word.substr(0, eq), value = word.substr(eq + 1);
        if (key == "placement") {
          have_placement = true;
          size_t p = 0;
          while (p <= value.size()) {
            size_t q = value.find(',', p);
            if (q == std::string_view::npos) q = value.size();
            int64_t v = 0;
            if (!ParseInt(value.substr(p, q - p), v) || v < 0 || v > INT32_MAX) {
              return where(fmt::format("placement '{}': expected device indices like 0,1,1,0", value));
            }
            s.placement.push_back(static_cast<int32_t>(v));
            p = q + 1;
          }
          continue;
        }
        int64_t v = 0;
        int slot = key == "stages" ? 0 : key == "microbatches" ? 1 : key == "devices" ? 2
                 : key == "replicas" ? 3 : -1;
        if (slot < 0) {
          return where(fmt::format("unknown header key '{}': expected stages, microbatches, "
                                   "devices, replicas or placement", key));
        }
        if (!ParseInt(value, v) || v < 1 || v > kMaxShape) {
          return where(fmt::format("{}={}: expected an integer from 1 to {}", key, value, kMaxShape));
        }
        if (seen[slot]) return where(fmt::format("header key '{}' given twice", key));
        seen[slot] = true;
        const auto n = static_cast<int32_t>(v);
        if (slot == 0) s.num_stages = n;
        if (slot == 1) s.num_micro_batches = n;
        if (slot == 2) { s.num_devices = n; have_devices = true; }
        if (slot == 3) s.replicas = n;
      }
      if (!seen[0] || !seen[1] || !have_placement) {
        return where("header needs stages=, microbatches= and placement=");
      }
      continue;
    }
    auto& program = s.programs.emplace_back();
    if (words.size() == 1 && words[0] == "-") continue;
    program.reserve(words.size());
    for (auto word : words) {
      auto op = ParseToken(word);
      if (!op) return where(op.error().message);
      program.push_back(*op);
    }
  }
  if (s.programs.empty()) return Fail(fmt::format("{}: no device lines", source));
  if (have_header) {
    const auto device_lines = static_cast<int32_t>(s.programs.size());
    if (!have_devices) s.num_devices = device_lines;
    if (s.num_devices != device_lines) {
      return Fail(fmt::format("{}: header says devices={} but {} device lines follow", source,
                              s.num_devices, device_lines));
    }
    if (static_cast<int32_t>(s.placement.size()) != s.num_stages) {
      return Fail(fmt::format("{}: placement lists {} devices for stages={}", source,
                              s.placement.size(), s.num_stages));
    }
  } else if (auto shape = InferShape(s); !shape) {
    return Fail(fmt::format("{}: {}", source, shape.error().message));
  }
  AssignPeers(s);
  Renumber(s);
  return s;
}

}  // namespace twinpipe::ir
