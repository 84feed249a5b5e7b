#include "ir/json_format.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace twinpipe::ir {
namespace {

using nlohmann::json;

// Fields of an op object by kind: stage (all but STEP), microbatch (ops with a
// micro-batch), peer (comm), bytes (comm and all-reduce).
bool HasStage(OpKind k) { return k != OpKind::kStep; }
bool HasPeer(OpKind k) { return IsComm(k); }
bool HasBytes(OpKind k) { return IsComm(k) || k == OpKind::kAllReduce; }

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Result<int64_t> Int(const json& obj, const std::string& key, const std::string& path,
                      int64_t lo, int64_t hi) {
    auto it = obj.find(key);
    if (it == obj.end()) return Fail(fmt::format("{}: {}: missing key '{}'", source_, path, key));
    if (!it->is_number_integer()) {
      return Fail(fmt::format("{}: {}/{}: expected an integer, got {}", source_, path, key,
                              it->type_name()));
    }
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) {
      return Fail(fmt::format("{}: {}/{}: {} is out of range {}..{}", source_, path, key, v, lo, hi));
    }
    return v;
  }

  Result<void> OnlyKeys(const json& obj, const std::string& path,
                        std::initializer_list<std::string_view> allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (auto a : allowed) ok = ok || it.key() == a;
      if (!ok) {
        return Fail(fmt::format("{}: {}/{}: unknown key (expected one of {})", source_, path,
                                it.key(), fmt::join(allowed, ", ")));
      }
    }
    return {};
  }

  std::string_view source_;
};

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
      out += '}';
    }
    out += program.empty() ? "]" : "\n    ]";
  }
  out += s.programs.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Result<Schedule> ParseJson(std::string_view text, std::string_view source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return Fail(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  Reader r(source);
  if (!doc.is_object()) return Fail(fmt::format("{}: /: expected an object", source));
  if (auto ok = r.OnlyKeys(doc, "", {"format", "version", "stages", "microbatches", "devices",
                                     "replicas", "placement", "programs"});
      !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto f = doc.find("format"); f == doc.end() || *f != "twinpipe-schedule") {
    return Fail(fmt::format("{}: /format: expected \"twinpipe-schedule\"", source));
  }
  Schedule s;
  constexpr int64_t kMaxCount = 1 << 24;
  auto version = r.Int(doc, "version", "", 1, 1);
  auto stages = r.Int(doc, "stages", "", 1, kMaxCount);
  auto micro_batches = r.Int(doc, "microbatches", "", 1, kMaxCount);
  auto devices = r.Int(doc, "devices", "", 1, kMaxCount);
  for (auto* v : {&version, &stages, &micro_batches, &devices}) {
    if (!*v) return tl::unexpected(v->error());
  }
  s.num_stages = static_cast<int32_t>(*stages);
  s.num_micro_batches = static_cast<int32_t>(*micro_batches);
  s.num_devices = static_cast<int32_t>(*devices);
  if (doc.contains("replicas")) {
    auto replicas = r.Int(doc, "replicas", "", 1, kMaxCount);
    if (!replicas) return tl::unexpected(replicas.error());
    s.replicas = static_cast<int32_t>(*replicas);
  }
  const json* placement = doc.contains("placement") ? &doc["placement"] : nullptr;
  if (!placement || !placement->is_array()) {
    return Fail(fmt::format("{}: /placement: expected an array of device indices", source));
  }
  for (size_t i = 0; i < placement->size(); ++i) {
    const json& v = (*placement)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= *devices) {
      return Fail(fmt::format("{}: /placement/{}: expected a device index 0..{}", source, i,
                              *devices - 1));
    }
    s.placement.push_back(v.get<int32_t>());
  }
  if (static_cast<int64_t>(s.placement.size()) != *stages) {
    return Fail(fmt::format("{}: /placement: has {} entries, expected one per stage ({})", source,
                            s.placement.size(), *stages));
  }
  const json* programs = doc.contains("programs") ? &doc["programs"] : nullptr;
  if (!programs || !programs->is_array()) {
    return Fail(fmt::format("{}: /programs: expected an array with one program per device", source));
  }
  if (static_cast<int64_t>(programs->size()) != *devices) {
    return Fail(fmt::format("{}: /programs: has {} programs, expected one per device ({})", source,
                            programs->size(), *devices));
  }
  int32_t next_id = 0;
  for (size_t d = 0; d < programs->size(); ++d) {
    const json& program = (*programs)[d];
    const std::string ppath = fmt::format("/programs/{}", d);
    if (!program.is_array()) return Fail(fmt::format("{}: {}: expected an array of ops", source, ppath));
    auto& ops = s.programs.emplace_back();
    ops.reserve(program.size());
    for (size_t i = 0; i < program.size(); ++i) {
      const json& o = program[i];
      const std::string path = fmt::format("{}/{}", ppath, i);
      if (!o.is_object()) return Fail(fmt::format("{}: {}: expected an op object", source, path));
      auto kind_it = o.find("kind");
      std::optional<OpKind> kind;
      if (kind_it != o.end() && kind_it->is_string()) kind = OpKindFromName(kind_it->get<std::string>());
      if (!kind) {
        return Fail(fmt::format("{}: {}/kind: expected one of F, B, I, W, R, SEND_F, RECV_F, "
                                "SEND_B, RECV_B, ALLREDUCE, STEP",
                                source, path));
      }
      Op op{.kind = *kind};
      auto keys_ok = r.OnlyKeys(o, path, {"id", "kind", "device", "stage", "microbatch", "peer", "bytes"});
      if (!keys_ok) return tl::unexpected(keys_ok.error());
      auto id = r.Int(o, "id", path, 0, INT32_MAX);
      auto device = r.Int(o, "device", path, 0, *devices - 1);
      if (!id) return tl::unexpected(id.error());
      if (!device) return tl::unexpected(device.error());
      // The file's id is read (and range-checked) but not kept: ids are
      // canonical, 0..N-1 in program order (DESIGN.md section 4), and
      // consumers index arrays by them.
      op.id = next_id++;
      op.device = static_cast<int32_t>(*device);
      auto field = [&](bool wanted, const char* key, int64_t lo, int64_t hi, auto& dst) -> Result<void> {
        if (!wanted) {
          if (o.contains(key)) {
            return Fail(fmt::format("{}: {}/{}: a {} op has no {}", source, path, key,
                                    OpKindName(*kind), key));
          }
          return {};
        }
        auto v = r.Int(o, key, path, lo, hi);
        if (!v) return tl::unexpected(v.error());
        dst = static_cast<std::remove_reference_t<decltype(dst)>>(*v);
        return {};
      };
      for (auto res : {field(HasStage(*kind), "stage", 0, *stages - 1, op.stage),
                       field(HasMicroBatch(*kind), "microbatch", 0, *micro_batches - 1, op.micro_batch),
                       field(HasPeer(*kind), "peer", 0, *devices - 1, op.peer),
                       field(HasBytes(*kind), "bytes", 0, INT64_MAX, op.bytes)}) {
        if (!res) return tl::unexpected(res.error());
      }
      ops.push_back(op);
    }
  }
  return s;
}

}  // namespace twinpipe::ir
