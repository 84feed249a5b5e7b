#include "ir/json_format.h"

#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "ir/json_reader.h"

namespace twinpipe::ir {
namespace {

// Fields of an op object by kind: stage (all but STEP), microbatch (ops with a
// micro-batch), peer (comm), bytes (comm and all-reduce).
bool HasStage(OpKind k) { return k != OpKind::kStep; }
bool HasPeer(OpKind k) { return IsComm(k); }
bool HasBytes(OpKind k) { return IsComm(k) || k == OpKind::kAllReduce; }

}  // namespace

std::string PrintJson(const Schedule& s) {
  std::string out;
  out.reserve(static_cast<size_t>(s.NumOps()) * 80 + 256);
  out += fmt::format(
      "{{\n  \"format\": \"twinpipe-schedule\",\n  \"version\": 1,\n  \"stages\": {},\n"
      "  \"microbatches\": {},\n  \"devices\": {},\n  \"replicas\": {},\n  \"placement\": [{}],\n"
      "  \"programs\": [",
      s.num_stages, s.num_micro_batches, s.num_devices, s.replicas, fmt::join(s.placement, ", "));
  for (size_t d = 0; d < s.programs.size(); ++d) {
    out += d ? ",\n    [" : "\n    [";
    const auto& program = s.programs[d];
    for (size_t i = 0; i < program.size(); ++i) {
      const Op& op = program[i];
      out += i ? ",\n      " : "\n      ";
      fmt::format_to(std::back_inserter(out), "{{\"id\": {}, \"kind\": \"{}\", \"device\": {}", op.id,
                     OpKindName(op.kind), op.device);
      if (HasStage(op.kind)) fmt::format_to(std::back_inserter(out), ", \"stage\": {}", op.stage);
      if (HasMicroBatch(op.kind)) {
        fmt::format_to(std::back_inserter(out), ", \"microbatch\": {}", op.micro_batch);
      }
      if (HasPeer(op.kind)) fmt::format_to(std::back_inserter(out), ", \"peer\": {}", op.peer);
      if (HasBytes(op.kind)) fmt::format_to(std::back_inserter(out), ", \"bytes\": {}", op.bytes);
      if (op.paired) out += ", \"paired\": true";
      out += '}';
    }
    out += program.empty() ? "]" : "\n    ]";
  }
  out += s.programs.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

namespace {

constexpr int64_t kMaxCount = 1 << 24;

// One op of device `device`'s program at `path`; `id` is its canonical id.
Op ReadOp(const json::Reader& r, const json::Json& o, const std::string& path, const Schedule& s, int32_t id) {
  if (!o.is_object()) r.Fail(path, "expected an op object");
  auto kind_it = o.find("kind");
  std::optional<OpKind> kind;
  if (kind_it != o.end() && kind_it->is_string()) kind = OpKindFromName(kind_it->get<std::string>());
  if (!kind) r.Fail(path + "/kind", "expected one of F, B, I, W, R, SEND_F, RECV_F, SEND_B, RECV_B, ALLREDUCE, STEP");
  r.Keys(o, path, {"id", "kind", "device", "stage", "microbatch", "peer", "bytes", "paired"});
  // The file's id is read (and range-checked) but not kept: ids are
  // canonical, 0..N-1 in program order (DESIGN.md section 4), and consumers
  // index arrays by them.
  r.Int(o, "id", path, 0, INT32_MAX);
  Op op{.id = id, .kind = *kind};
  op.device = static_cast<int32_t>(r.Int(o, "device", path, 0, s.num_devices - 1));
  // A field the kind has is required; one it has not is refused.
  auto field = [&](bool wanted, const char* key, int64_t hi) -> int64_t {
    if (wanted) return r.Int(o, key, path, 0, hi);
    if (o.contains(key)) r.Fail(path + "/" + key, fmt::format("a {} op has no {}", OpKindName(*kind), key));
    return -1;
  };
  const int64_t stage = field(HasStage(*kind), "stage", s.num_stages - 1);
  const int64_t micro_batch = field(HasMicroBatch(*kind), "microbatch", s.num_micro_batches - 1);
  const int64_t peer = field(HasPeer(*kind), "peer", s.num_devices - 1);
  const int64_t bytes = field(HasBytes(*kind), "bytes", INT64_MAX);
  if (stage >= 0) op.stage = static_cast<int32_t>(stage);
  if (micro_batch >= 0) op.micro_batch = static_cast<int32_t>(micro_batch);
  if (peer >= 0) op.peer = static_cast<int32_t>(peer);
  if (bytes >= 0) op.bytes = bytes;
  op.paired = r.Bool(o, "paired", path, false);
  if (op.paired && *kind != OpKind::kForward) {
    r.Fail(path + "/paired", fmt::format("only a forward pairs with a backward; this op is {}", OpKindName(*kind)));
  }
  return op;
}

Schedule ReadSchedule(const json::Reader& r, const json::Json& doc) {
  if (!doc.is_object()) r.Fail("", "expected an object");
  r.Keys(doc, "", {"format", "version", "stages", "microbatches", "devices", "replicas", "placement", "programs"});
  if (auto f = doc.find("format"); f == doc.end() || *f != "twinpipe-schedule") {
    r.Fail("/format", "expected \"twinpipe-schedule\"");
  }
  Schedule s;
  r.Int(doc, "version", "", 1, 1);
  s.num_stages = static_cast<int32_t>(r.Int(doc, "stages", "", 1, kMaxCount));
  s.num_micro_batches = static_cast<int32_t>(r.Int(doc, "microbatches", "", 1, kMaxCount));
  s.num_devices = static_cast<int32_t>(r.Int(doc, "devices", "", 1, kMaxCount));
  s.replicas = static_cast<int32_t>(r.Int(doc, "replicas", "", 1, kMaxCount, s.replicas));
  const auto placement = doc.find("placement");
  if (placement == doc.end() || !placement->is_array()) r.Fail("/placement", "expected an array of device indices");
  for (size_t i = 0; i < placement->size(); ++i) {
    const json::Json& v = (*placement)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= s.num_devices) {
      r.Fail(fmt::format("/placement/{}", i), fmt::format("expected a device index 0..{}", s.num_devices - 1));
    }
    s.placement.push_back(v.get<int32_t>());
  }
  if (static_cast<int64_t>(s.placement.size()) != s.num_stages) {
    r.Fail("/placement", fmt::format("has {} entries, expected one per stage ({})", s.placement.size(), s.num_stages));
  }
  const auto programs = doc.find("programs");
  if (programs == doc.end() || !programs->is_array()) {
    r.Fail("/programs", "expected an array with one program per device");
  }
  if (static_cast<int64_t>(programs->size()) != s.num_devices) {
    r.Fail("/programs", fmt::format("has {} programs, expected one per device ({})", programs->size(), s.num_devices));
  }
  int32_t next_id = 0;
  std::unordered_map<int64_t, std::pair<size_t, size_t>> id_ops;  // a file's id: the (program, op) that gave it
  for (size_t d = 0; d < programs->size(); ++d) {
    const json::Json& program = (*programs)[d];
    const std::string path = fmt::format("/programs/{}", d);
    if (!program.is_array()) r.Fail(path, "expected an array of ops");
    auto& ops = s.programs.emplace_back();
    ops.reserve(program.size());
    for (size_t i = 0; i < program.size(); ++i) {
      const std::string op_path = fmt::format("{}/{}", path, i);
      ops.push_back(ReadOp(r, program[i], op_path, s, next_id++));
      // Not kept, but two ops of one id say the file is not what its writer meant.
      const int64_t id = program[i].at("id").get<int64_t>();  // ReadOp required it
      if (auto [it, fresh] = id_ops.emplace(id, std::pair{d, i}); !fresh) {
        r.Fail(op_path + "/id",
               fmt::format("id {} is already /programs/{}/{}'s", id, it->second.first, it->second.second));
      }
    }
  }
  return s;
}

}  // namespace

Result<Schedule> ParseJson(std::string_view text, std::string_view source) {
  return json::TryRead([&] {
    const json::Reader r{std::string(source)};
    return ReadSchedule(r, r.Parse(text));
  });
}

}  // namespace twinpipe::ir
