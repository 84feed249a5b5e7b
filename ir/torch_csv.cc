#include "ir/torch_csv.h"

#include <charconv>
#include <set>

#include <fmt/format.h>

#include "ir/lines.h"
#include "ir/passes.h"
#include "ir/text_format.h"

namespace twinpipe::ir {

std::string_view TorchDialectName(TorchDialect d) {
  switch (d) {
    case TorchDialect::kAuto: return "auto";
    case TorchDialect::kCurrent: return "current";
    case TorchDialect::kOlder: return "older";
  }
  return "auto";
}

std::optional<TorchDialect> TorchDialectFromName(std::string_view name) {
  if (name == "auto") return TorchDialect::kAuto;
  if (name == "current") return TorchDialect::kCurrent;
  if (name == "older") return TorchDialect::kOlder;
  return std::nullopt;
}

namespace {

// An action as written, before the dialect gives B and W their meaning.
struct RawAction {
  std::string_view name;  // "F", "B", "BW", "SEND_F", ...
  int32_t stage = 0;
  int32_t micro_batch = 0;
  int line = 0;
  int column = 0;  // 1-based cell index
};

bool ParseIndex(std::string_view s, int32_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Result<RawAction> ParseAction(std::string_view cell) {
  size_t i = 0;
  while (i < cell.size() && cell[i] >= '0' && cell[i] <= '9') ++i;
  size_t j = i;
  while (j < cell.size() && ((cell[j] >= 'A' && cell[j] <= 'Z') || cell[j] == '_')) ++j;
  RawAction a;
  a.name = cell.substr(i, j - i);
  if (!ParseIndex(cell.substr(0, i), a.stage) || a.name.empty() ||
      !ParseIndex(cell.substr(j), a.micro_batch)) {
    return Fail(fmt::format("'{}': expected <stage><ACTION><micro-batch> such as 0F0 or 2SEND_B3",
                            cell));
  }
  static const std::set<std::string_view> known = {"F", "B", "I", "W", "BW", "SEND_F",
                                                   "RECV_F", "SEND_B", "RECV_B"};
  if (!known.contains(a.name)) {
    return Fail(fmt::format("'{}': action {} is not supported (twinpipe reads F, I, W, B, BW, "
                            "SEND_F, RECV_F, SEND_B, RECV_B and OVERLAP_F_B)",
                            cell, a.name));
  }
  return a;
}

}  // namespace

Result<TorchImport> ImportTorchCsv(std::string_view text, std::string_view source,
                                   TorchDialect dialect) {
  TorchImport result;
  std::vector<std::vector<RawAction>> rows;
  Lines lines(text);
  for (std::string_view line; lines.Next(line);) {
    const int line_no = lines.number();
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto& row = rows.emplace_back();
    if (Trim(line).empty()) continue;  // a rank with nothing to do
    size_t p = 0;
    int column = 0;
    while (p <= line.size()) {
      size_t q = line.find(',', p);
      if (q == std::string_view::npos) q = line.size();
      std::string_view cell = Trim(line.substr(p, q - p));
      p = q + 1;
      ++column;
      auto where = [&](const std::string& msg) {
        return Fail(fmt::format("{}:{}: cell {}: {}", source, line_no, column, msg));
      };
      if (cell.empty()) {
        ++result.idle_slots;
        continue;
      }
      if (cell.front() == '(') {
        constexpr std::string_view kOverlap = ")OVERLAP_F_B";
        auto close = cell.find(')');
        auto semi = cell.find(';');
        if (close == std::string_view::npos || cell.substr(close) != kOverlap ||
            semi == std::string_view::npos || semi > close) {
          return where(fmt::format("'{}': expected (<forward>;<backward>)OVERLAP_F_B", cell));
        }
        for (auto part : {cell.substr(1, semi - 1), cell.substr(semi + 1, close - semi - 1)}) {
          auto a = ParseAction(Trim(part));
          if (!a) return where(a.error().message);
          a->line = line_no;
          a->column = column;
          row.push_back(*a);
        }
        ++result.overlapped;
        continue;
      }
      auto a = ParseAction(cell);
      if (!a) return where(a.error().message);
      a->line = line_no;
      a->column = column;
      row.push_back(*a);
    }
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();
  if (rows.empty()) return Fail(fmt::format("{}: no actions", source));

  // Dialect.
  bool has_i = false, has_bw = false, b_and_w = false;
  std::set<std::pair<int32_t, int32_t>> b_pairs, w_pairs;
  const RawAction* first_i = nullptr;
  const RawAction* first_bw = nullptr;
  for (const auto& row : rows) {
    for (const auto& a : row) {
      if (a.name == "I") { has_i = true; if (!first_i) first_i = &a; }
      if (a.name == "BW") { has_bw = true; if (!first_bw) first_bw = &a; }
      if (a.name == "B") b_pairs.emplace(a.stage, a.micro_batch);
      if (a.name == "W") w_pairs.emplace(a.stage, a.micro_batch);
    }
  }
  for (const auto& p : b_pairs) b_and_w = b_and_w || w_pairs.contains(p);
  TorchDialect used = dialect;
  if (used == TorchDialect::kAuto) {
    used = has_i ? TorchDialect::kCurrent
                 : (has_bw || b_and_w) ? TorchDialect::kOlder : TorchDialect::kCurrent;
  }
  if (used == TorchDialect::kCurrent && first_bw) {
    return Fail(fmt::format("{}:{}: cell {}: BW belongs to the older dialect, but the current one "
                            "was {}", source, first_bw->line, first_bw->column,
                            dialect == TorchDialect::kAuto ? "detected" : "forced"));
  }
  if (used == TorchDialect::kOlder && first_i) {
    return Fail(fmt::format("{}:{}: cell {}: I belongs to the current dialect, but the older one "
                            "was forced", source, first_i->line, first_i->column));
  }
  result.dialect = used;

  Schedule& s = result.schedule;
  s.programs.resize(rows.size());
  for (size_t d = 0; d < rows.size(); ++d) {
    auto& program = s.programs[d];
    program.reserve(rows[d].size() + 1);
    bool computes = false;
    for (const auto& a : rows[d]) {
      OpKind kind;
      if (a.name == "F") kind = OpKind::kForward;
      else if (a.name == "I") kind = OpKind::kBackwardInput;
      else if (a.name == "W") kind = OpKind::kBackwardWeight;
      else if (a.name == "BW") kind = OpKind::kBackward;
      else if (a.name == "B") kind = used == TorchDialect::kOlder ? OpKind::kBackwardInput : OpKind::kBackward;
      else kind = *OpKindFromName(a.name);
      result.had_comm = result.had_comm || IsComm(kind);
      computes = computes || !IsComm(kind);
      program.push_back(Op{.kind = kind, .stage = a.stage, .micro_batch = a.micro_batch});
    }
    if (computes) program.push_back(Op{.kind = OpKind::kStep});
  }
  if (auto shape = InferShape(s); !shape) {
    return Fail(fmt::format("{}: {}", source, shape.error().message));
  }
  AssignPeers(s);
  Renumber(s);
  if (!result.had_comm) {
    if (auto ok = InsertComm(s, {}); !ok) {
      return Fail(fmt::format("{}: {}", source, ok.error().message));
    }
  }
  return result;
}

std::string ExportTorchCsv(const Schedule& s, TorchDialect dialect, int* dropped) {
  const bool older = dialect == TorchDialect::kOlder;
  int skipped = 0;
  std::string out;
  for (const auto& program : s.programs) {
    bool first = true;
    for (const Op& op : program) {
      std::string_view name;
      switch (op.kind) {
        case OpKind::kBackward: name = older ? "BW" : "B"; break;
        case OpKind::kBackwardInput: name = older ? "B" : "I"; break;
        case OpKind::kStep:
        case OpKind::kAllReduce:
        case OpKind::kRecompute: ++skipped; continue;
        default: name = OpKindName(op.kind);
      }
      if (!first) out += ',';
      first = false;
      fmt::format_to(std::back_inserter(out), "{}{}{}", op.stage, name, op.micro_batch);
    }
    out += '\n';
  }
  if (dropped) *dropped = skipped;
  return out;
}

}  // namespace twinpipe::ir
