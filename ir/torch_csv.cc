#include "ir/torch_csv.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

constexpr std::array<std::string_view, kNumTorchBookkeeping> kBookkeepingNames = {
    "UNSHARD", "RESHARD", "REDUCE_GRAD", "WAIT_REDUCE_GRAD", "WAIT_SEND_F", "WAIT_SEND_B"};

// What an action is to the IR.
enum class ActionClass { kCompute, kComm, kBookkeeping };

struct KnownAction {
  std::string_view name;
  ActionClass cls;
  bool micro_batch;  // torch writes one
};

// Every action some torch release writes (see the table in the header), and
// BW, which PyTorch's main branch wrote between 2.5 and 2.6.
constexpr std::array<KnownAction, 15> kKnownActions = {{
    {"F", ActionClass::kCompute, true},
    {"I", ActionClass::kCompute, true},
    {"W", ActionClass::kCompute, true},
    {"B", ActionClass::kCompute, true},
    {"BW", ActionClass::kCompute, true},
    {"SEND_F", ActionClass::kComm, true},
    {"RECV_F", ActionClass::kComm, true},
    {"SEND_B", ActionClass::kComm, true},
    {"RECV_B", ActionClass::kComm, true},
    {"UNSHARD", ActionClass::kBookkeeping, false},
    {"RESHARD", ActionClass::kBookkeeping, false},
    {"REDUCE_GRAD", ActionClass::kBookkeeping, false},
    {"WAIT_REDUCE_GRAD", ActionClass::kBookkeeping, false},
    {"WAIT_SEND_F", ActionClass::kBookkeeping, true},
    {"WAIT_SEND_B", ActionClass::kBookkeeping, true},
}};
constexpr std::string_view kKnownList =
    "F, I, W, B, BW, (;)OVERLAP_F_B, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B, "
    "UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD";

// An action as written, before the dialect gives B and W their meaning.
struct RawAction {
  std::string_view name;  // "F", "B", "BW", "SEND_F", "UNSHARD", ...
  ActionClass cls = ActionClass::kCompute;
  int32_t stage = 0;
  int32_t micro_batch = -1;  // -1: none written
  int line = 0;
  int column = 0;  // 1-based cell index
  bool overlaps_next = false;  // the first action of an OVERLAP_F_B cell
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
  const std::string_view digits = cell.substr(j);
  if (!ParseIndex(cell.substr(0, i), a.stage) || a.name.empty() ||
      (!digits.empty() && !ParseIndex(digits, a.micro_batch))) {
    return Fail(fmt::format("'{}': expected <stage><ACTION><micro-batch> such as 0F0 or 2SEND_B3 "
                            "(or <stage><ACTION> such as 0UNSHARD)",
                            cell));
  }
  auto known = std::find_if(kKnownActions.begin(), kKnownActions.end(),
                            [&](const KnownAction& k) { return k.name == a.name; });
  if (known == kKnownActions.end()) {
    return Fail(fmt::format("'{}': {} is not an action torch writes ({})", cell, a.name, kKnownList));
  }
  a.cls = known->cls;
  if (known->micro_batch && digits.empty()) {
    return Fail(fmt::format("'{}': {} needs a micro-batch, as in {}{}0", cell, a.name, a.stage, a.name));
  }
  if (!known->micro_batch && !digits.empty()) {
    return Fail(fmt::format("'{}': torch writes {} without a micro-batch, as in {}{}", cell, a.name, a.stage,
                            a.name));
  }
  return a;
}

// The IR's kind of a compute or comm action's name in `dialect`.
OpKind KindOf(std::string_view name, TorchDialect dialect) {
  if (name == "I") return OpKind::kBackwardInput;
  if (name == "W") return OpKind::kBackwardWeight;
  if (name == "BW") return OpKind::kBackward;
  if (name == "B") return dialect == TorchDialect::kOlder ? OpKind::kBackwardInput : OpKind::kBackward;
  return *OpKindFromName(name);  // F and the transfers: the IR's names
}

bool IsBackwardName(std::string_view name) { return name == "B" || name == "BW" || name == "I" || name == "W"; }

// Checks what torch's bookkeeping actions say about the schedule: a
// REDUCE_GRAD is its stage's gradient reduction point (torch scales the
// stage's gradients there), so it must follow all of the stage's backward on
// the stage's rank, once per stage, for every stage or none; where the file
// has waits (torch 2.15's form), they pair as 2.15 requires.
Result<void> CheckBookkeeping(const std::vector<std::vector<RawAction>>& rows, std::string_view source,
                              const std::vector<int32_t>& placement, TorchImport& result) {
  auto at = [&](const RawAction& a, const std::string& msg) {
    return Fail(fmt::format("{}:{}: cell {}: {}", source, a.line, a.column, msg));
  };
  const bool has_send_waits = result.bookkeeping[static_cast<int>(TorchBookkeeping::kWaitSendF)] +
                                  result.bookkeeping[static_cast<int>(TorchBookkeeping::kWaitSendB)] > 0;
  const bool has_reduce_waits = result.bookkeeping[static_cast<int>(TorchBookkeeping::kWaitReduceGrad)] > 0;
  std::map<int32_t, const RawAction*> reduced;  // stage -> its REDUCE_GRAD
  for (size_t d = 0; d < rows.size(); ++d) {
    const auto& row = rows[d];
    // Last backward of each stage in this row, by position.
    std::map<int32_t, size_t> last_backward;
    for (size_t i = 0; i < row.size(); ++i) {
      if (IsBackwardName(row[i].name)) last_backward[row[i].stage] = i;
    }
    std::map<std::tuple<std::string_view, int32_t, int32_t>, const RawAction*> pending_sends;
    const RawAction* pending_reduce = nullptr;
    for (size_t i = 0; i < row.size(); ++i) {
      const RawAction& a = row[i];
      if (a.name == "SEND_F" || a.name == "SEND_B") {
        pending_sends[{a.name, a.stage, a.micro_batch}] = &a;
      } else if (a.name == "WAIT_SEND_F" || a.name == "WAIT_SEND_B") {
        const std::string_view send = a.name.substr(5);
        auto it = pending_sends.find({send, a.stage, a.micro_batch});
        if (it == pending_sends.end()) {
          return at(a, fmt::format("{}{}{} waits for {}{}{}, which rank {} has not sent before it", a.stage, a.name,
                                   a.micro_batch, a.stage, send, a.micro_batch, d));
        }
        pending_sends.erase(it);
      } else if (a.name == "REDUCE_GRAD") {
        if (a.stage >= static_cast<int32_t>(placement.size()) || placement[a.stage] != static_cast<int32_t>(d)) {
          return at(a, fmt::format("{}REDUCE_GRAD on rank {}, which does not compute stage {}", a.stage, d, a.stage));
        }
        if (auto it = reduced.find(a.stage); it != reduced.end()) {
          return at(a, fmt::format("a second REDUCE_GRAD for stage {} (the first at line {}, cell {}): torch would "
                                   "scale its gradients twice",
                                   a.stage, it->second->line, it->second->column));
        }
        if (auto it = last_backward.find(a.stage); it != last_backward.end() && it->second > i) {
          const RawAction& b = row[it->second];
          return at(a, fmt::format("{}REDUCE_GRAD comes before {}{}{} (cell {}): torch would reduce and scale stage "
                                   "{}'s gradients before all of its backward",
                                   a.stage, b.stage, b.name, b.micro_batch, b.column, a.stage));
        }
        if (has_reduce_waits && pending_reduce) {
          return at(a, fmt::format("{}REDUCE_GRAD while stage {}'s reduction has no WAIT_REDUCE_GRAD yet (torch 2.15 "
                                   "keeps one reduction pending per rank)",
                                   a.stage, pending_reduce->stage));
        }
        reduced[a.stage] = &a;
        result.reduce_grads.push_back({static_cast<int32_t>(d), a.stage, a.line, a.column});
        pending_reduce = &a;
      } else if (a.name == "WAIT_REDUCE_GRAD") {
        if (!pending_reduce || pending_reduce->stage != a.stage) {
          return at(a, fmt::format("{}WAIT_REDUCE_GRAD without a pending {}REDUCE_GRAD on rank {}", a.stage, a.stage,
                                   d));
        }
        pending_reduce = nullptr;
      }
    }
    if (has_send_waits && !pending_sends.empty()) {
      const RawAction& s = *std::min_element(pending_sends.begin(), pending_sends.end(), [](auto& x, auto& y) {
                              return x.second->column < y.second->column;
                            })->second;
      return at(s, fmt::format("{}{}{} has no WAIT_{} after it (the file has waits, torch 2.15's form, which "
                               "needs one per send)",
                               s.stage, s.name, s.micro_batch, s.name));
    }
    if (has_reduce_waits && pending_reduce) {
      return at(*pending_reduce, fmt::format("{}REDUCE_GRAD has no WAIT_REDUCE_GRAD after it", pending_reduce->stage));
    }
  }
  if (!reduced.empty() && reduced.size() != placement.size()) {
    std::vector<int32_t> missing;
    for (int32_t st = 0; st < static_cast<int32_t>(placement.size()); ++st) {
      if (!reduced.contains(st)) missing.push_back(st);
    }
    return Fail(fmt::format("{}: REDUCE_GRAD for {} of {} stages, none for stage{} {}: torch would scale only "
                            "some stages' gradients",
                            source, reduced.size(), placement.size(), missing.size() == 1 ? "" : "s",
                            fmt::join(missing, ", ")));
  }
  return {};
}

}  // namespace

std::string_view TorchBookkeepingName(TorchBookkeeping action) {
  return kBookkeepingNames[static_cast<int>(action)];
}

Result<TorchImport> ImportTorchCsv(std::string_view text, std::string_view source,
                                   TorchDialect dialect) {
  TorchImport result;
  std::vector<std::vector<RawAction>> rows;  // compute, comm and bookkeeping actions as written
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
          if (a->cls != ActionClass::kCompute) {
            return where(fmt::format("'{}': OVERLAP_F_B overlaps compute actions; {} is not one", cell, a->name));
          }
          a->line = line_no;
          a->column = column;
          a->overlaps_next = part.data() == cell.data() + 1;
          row.push_back(*a);
        }
        ++result.overlapped;
        continue;
      }
      auto a = ParseAction(cell);
      if (!a) return where(a.error().message);
      a->line = line_no;
      a->column = column;
      if (a->cls == ActionClass::kBookkeeping) {
        const auto k = std::find(kBookkeepingNames.begin(), kBookkeepingNames.end(), a->name);
        ++result.bookkeeping[k - kBookkeepingNames.begin()];
      }
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
    // The older dialect's B is an input backward where a W of its stage and
    // micro-batch follows; alone it is the full backward (torch 2.5 writes
    // both: B with W for zero-bubble schedules, B alone for the others).
    auto kind_of = [&](const RawAction& a) {
      if (used == TorchDialect::kOlder && a.name == "B" && !w_pairs.contains({a.stage, a.micro_batch})) {
        return OpKind::kBackward;
      }
      return KindOf(a.name, used);
    };
    for (size_t i = 0; i < rows[d].size(); ++i) {
      const RawAction& a = rows[d][i];
      if (a.cls == ActionClass::kBookkeeping) continue;
      const OpKind kind = kind_of(a);
      result.had_comm = result.had_comm || IsComm(kind);
      computes = computes || !IsComm(kind);
      // An OVERLAP_F_B of a forward and an input backward runs them
      // overlapped (a paired F); other overlapped actions run in turn.
      const bool paired = a.overlaps_next && kind == OpKind::kForward &&
                          IsInputBackward(kind_of(rows[d][i + 1]));
      program.push_back(Op{.kind = kind, .stage = a.stage, .micro_batch = a.micro_batch, .paired = paired});
    }
    if (computes) program.push_back(Op{.kind = OpKind::kStep});
  }
  if (auto shape = InferShape(s); !shape) {
    return Fail(fmt::format("{}: {}", source, shape.error().message));
  }
  if (auto ok = CheckBookkeeping(rows, source, s.placement, result); !ok) return tl::unexpected(ok.error());
  AssignPeers(s);
  Renumber(s);
  if (!result.had_comm) {
    if (auto ok = InsertComm(s, {}); !ok) {
      return Fail(fmt::format("{}: {}", source, ok.error().message));
    }
  }
  return result;
}

Result<TorchAction> ParseTorchAction(std::string_view cell, TorchDialect dialect) {
  auto a = ParseAction(Trim(cell));
  if (!a) return tl::unexpected(a.error());
  TorchAction out{.stage = a->stage, .micro_batch = a->micro_batch};
  if (a->cls == ActionClass::kBookkeeping) {
    const auto k = std::find(kBookkeepingNames.begin(), kBookkeepingNames.end(), a->name);
    out.bookkeeping = static_cast<TorchBookkeeping>(k - kBookkeepingNames.begin());
  } else {
    out.kind = KindOf(a->name, dialect);
  }
  return out;
}

Result<TorchVersion> ParseTorchVersion(std::string_view text) {
  TorchVersion v;
  const size_t dot = text.find('.');
  const size_t dot2 = dot == std::string_view::npos ? dot : text.find('.', dot + 1);
  int32_t major = 0, minor = 0, patch = 0;
  const bool ok = dot != std::string_view::npos && ParseIndex(text.substr(0, dot), major) &&
                  ParseIndex(text.substr(dot + 1, dot2 == std::string_view::npos ? dot2 : dot2 - dot - 1), minor) &&
                  (dot2 == std::string_view::npos || ParseIndex(text.substr(dot2 + 1), patch));
  if (!ok) return Fail(fmt::format("torch version '{}': expected X.Y such as 2.15 (or X.Y.Z)", text));
  v.major = major;
  v.minor = minor;
  if (v < kOldestTorch || v > kNewestTorch) {
    return Fail(fmt::format("torch version '{}': twinpipe writes the schedule CSVs of torch {}.{} to {}.{}", text,
                            kOldestTorch.major, kOldestTorch.minor, kNewestTorch.major, kNewestTorch.minor));
  }
  return v;
}

Result<std::string> ExportTorchCsv(const Schedule& s, const TorchExportOptions& options, TorchExportNotes* notes) {
  const TorchVersion v = options.version;
  const bool older_names = v < TorchVersion{2, 6};             // B = input backward (use_full_backward=False)
  const bool reduce_grad = !options.compute_only && v >= TorchVersion{2, 10};
  const bool waits = !options.compute_only && v >= TorchVersion{2, 15};
  TorchExportNotes n;

  // What kinds of backward the schedule has decides what 2.5 can run.
  const Op* full = nullptr;
  const Op* split = nullptr;
  std::set<int32_t> split_stages;
  for (const auto& program : s.programs) {
    for (const Op& op : program) {
      if (op.kind == OpKind::kBackward && !full) full = &op;
      if (op.kind == OpKind::kBackwardInput || op.kind == OpKind::kBackwardWeight) {
        if (!split) split = &op;
        split_stages.insert(op.stage);
      }
    }
  }
  if (older_names && full && split) {
    return Fail(fmt::format("torch {}.{} reads B as one kind of backward for a whole schedule (use_full_backward), "
                            "but this one has full backward ({}, device {}) and split I/W ({}, device {}); export "
                            "for torch 2.6 or later",
                            v.major, v.minor, OpToken(*full), full->device, OpToken(*split), split->device));
  }
  if (older_names) {
    // What torch 2.5.1's runtime cannot run at all (found by running every
    // export in it, scripts/torch_roundtrip.py): its _PipelineScheduleRuntime
    // is a PipelineScheduleMulti, which refuses a rank of one stage; and it
    // receives every non-first stage's input over the process group, with no
    // hand-off between two stages on one rank (a V placement).
    std::map<int32_t, int32_t> device_of;  // stage -> device
    std::map<int32_t, std::set<int32_t>> stages_of;
    for (size_t d = 0; d < s.programs.size(); ++d) {
      for (const Op& op : s.programs[d]) {
        if (op.kind == OpKind::kForward) {
          device_of.emplace(op.stage, static_cast<int32_t>(d));
          stages_of[static_cast<int32_t>(d)].insert(op.stage);
        }
      }
    }
    for (const auto& [device, stages] : stages_of) {
      if (stages.size() < 2) {
        return Fail(fmt::format("torch {}.{} runs a schedule CSV only with two or more stages per rank (its "
                                "_PipelineScheduleRuntime is a PipelineScheduleMulti), and device {} holds one "
                                "(stage {}); run this schedule with torch's ScheduleGPipe / Schedule1F1B there, or "
                                "export for torch 2.6 or later",
                                v.major, v.minor, device, *stages.begin()));
      }
    }
    for (const auto& [stage, device] : device_of) {
      auto next = device_of.find(stage + 1);
      if (next != device_of.end() && next->second == device) {
        return Fail(fmt::format("torch {}.{} receives every stage's input from another rank (its runtime has no "
                                "hand-off between stages of one rank), and stages {} and {} are both on device {}; "
                                "export for torch 2.6 or later",
                                v.major, v.minor, stage, stage + 1, device));
      }
    }
  }
  if (older_names && options.compute_only && !split) {
    return Fail(fmt::format("torch {}.{}'s compute-only loader needs a W for every stage and micro-batch "
                            "(_validate_schedule), and this schedule has full backward only; write compute and comm "
                            "(no --compute-only), which it runs with use_full_backward=True",
                            v.major, v.minor));
  }

  std::string out;
  int unpaired = 0;  // paired F's written in turn
  for (const auto& program : s.programs) {
    std::vector<std::string> cells;
    auto add = [&](int32_t stage, std::string_view name, int32_t micro_batch) {
      cells.push_back(micro_batch < 0 ? fmt::format("{}{}", stage, name)
                                      : fmt::format("{}{}{}", stage, name, micro_batch));
    };
    // Each stage's reduction point: after its last backward and the sends
    // that follow it (where InsertAllReduce puts an ALLREDUCE, and where
    // torch's own lowering puts REDUCE_GRAD).
    std::map<size_t, std::vector<int32_t>> reduce_after;
    if (reduce_grad) {
      std::map<int32_t, size_t> last;
      for (size_t i = 0; i < program.size(); ++i) {
        const OpKind k = program[i].kind;
        if (k == OpKind::kBackward || k == OpKind::kBackwardInput || k == OpKind::kBackwardWeight) {
          last[program[i].stage] = i;
        }
      }
      for (auto [stage, i] : last) {
        while (i + 1 < program.size() && IsSend(program[i + 1].kind)) ++i;
        reduce_after[i].push_back(stage);
      }
    }
    std::vector<std::tuple<OpKind, int32_t, int32_t>> pending_sends;  // in send order
    auto backward_name = [&](const Op& op) { return op.kind == OpKind::kBackward || older_names ? "B" : "I"; };
    size_t paired_backward = program.size();  // written in its F's OVERLAP_F_B cell
    for (size_t i = 0; i < program.size(); ++i) {
      const Op& op = program[i];
      // A paired F and its backward, recomputes aside (torch has none), as
      // one OVERLAP_F_B cell where the release has it; otherwise in turn.
      size_t j = i + 1;
      if (op.paired) {
        j = PairPartner(program, i);
        const bool comm_between =
            std::any_of(program.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                        program.begin() + static_cast<std::ptrdiff_t>(j), [](const Op& x) { return IsComm(x.kind); });
        if (j == program.size() || !IsInputBackward(program[j].kind) || comm_between || v < TorchVersion{2, 9}) {
          ++unpaired;
          j = program.size();
        }
      }
      if (i == paired_backward) {
        // written with its forward
      } else if (op.paired && j < program.size()) {
        const Op& b = program[j];
        cells.push_back(fmt::format("({}F{};{}{}{})OVERLAP_F_B", op.stage, op.micro_batch, b.stage,
                                    backward_name(b), b.micro_batch));
        ++n.overlapped;
        paired_backward = j;
      } else switch (op.kind) {
        case OpKind::kStep:
        case OpKind::kRecompute: ++n.dropped; break;
        case OpKind::kAllReduce: n.dropped += reduce_grad ? 0 : 1; break;  // REDUCE_GRAD stands for it
        case OpKind::kBackward:
        case OpKind::kBackwardInput: add(op.stage, backward_name(op), op.micro_batch); break;
        case OpKind::kSendF:
        case OpKind::kSendB:
          if (options.compute_only) break;
          add(op.stage, OpKindName(op.kind), op.micro_batch);
          pending_sends.emplace_back(op.kind, op.stage, op.micro_batch);
          break;
        case OpKind::kRecvF:
        case OpKind::kRecvB:
          if (!options.compute_only) add(op.stage, OpKindName(op.kind), op.micro_batch);
          break;
        default: add(op.stage, OpKindName(op.kind), op.micro_batch);
      }
      // torch 2.15's wait for a forward send: after this rank's backward of
      // the same (stage, micro-batch), which proves the peer received it.
      if (waits && IsInputBackward(op.kind)) {
        auto it = std::find(pending_sends.begin(), pending_sends.end(),
                            std::tuple{OpKind::kSendF, op.stage, op.micro_batch});
        if (it != pending_sends.end()) {
          add(op.stage, "WAIT_SEND_F", op.micro_batch);
          ++n.waits;
          pending_sends.erase(it);
        }
      }
      if (auto it = reduce_after.find(i); it != reduce_after.end()) {
        for (int32_t stage : it->second) {
          add(stage, "REDUCE_GRAD", -1);
          ++n.reduce_grads;
          if (waits) {
            add(stage, "WAIT_REDUCE_GRAD", -1);
            ++n.waits;
          }
        }
      }
    }
    if (waits) {
      for (const auto& [kind, stage, micro_batch] : pending_sends) {
        add(stage, kind == OpKind::kSendF ? "WAIT_SEND_F" : "WAIT_SEND_B", micro_batch);
        ++n.waits;
      }
    }
    out += fmt::format("{}\n", fmt::join(cells, ","));
  }

  if (unpaired > 0) {
    n.warnings.push_back(fmt::format(
        "{} overlapped F/B pair{} written as two actions run in turn ({}): the overlap that hides their "
        "communication is lost there", unpaired, unpaired == 1 ? "" : "s",
        v < TorchVersion{2, 9} ? fmt::format("torch {}.{} has no OVERLAP_F_B; 2.9 and later do", v.major, v.minor)
                               : "comm ops between the forward and its backward"));
  }
  if (v < TorchVersion{2, 7}) {
    n.warnings.push_back(fmt::format("torch {}.{} does not scale gradients by the micro-batch count (it has no "
                                     "scale_grads): average the loss over micro-batches yourself",
                                     v.major, v.minor));
  } else if (v < TorchVersion{2, 10} && !split_stages.empty()) {
    n.warnings.push_back(fmt::format("torch {}.{} scales a stage's gradients after its last full backward B only, "
                                     "so stage{} {} (I/W) stay unscaled: build the schedule with scale_grads=False "
                                     "and average the loss yourself, or export for torch 2.10 or later",
                                     v.major, v.minor, split_stages.size() == 1 ? "" : "s",
                                     fmt::join(split_stages, ", ")));
  }
  if (older_names && split) {
    n.warnings.push_back(fmt::format("torch {}.{} reads B as the input backward only when the schedule is built "
                                     "with use_full_backward=False",
                                     v.major, v.minor));
  }
  if (notes) *notes = std::move(n);
  return out;
}

}  // namespace twinpipe::ir
