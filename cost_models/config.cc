#include "cost_models/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/builders.h"
#include "ir/json_reader.h"

namespace twinpipe::cost {
namespace {

using nlohmann::json;

using ir::json::Reader;

constexpr double kMaxCount = 1e15;

// The config's field for a schedule shape's parameter.
std::string ShapeParameterPath(ir::ShapeParameter parameter) {
  switch (parameter) {
    case ir::ShapeParameter::kSchedule: return "/pipeline/schedule";
    case ir::ShapeParameter::kDevices: return "/pipeline/stages";
    case ir::ShapeParameter::kMicroBatches: return "/training/microbatches";
    case ir::ShapeParameter::kChunks: return "/pipeline/chunks";
  }
  return "/pipeline";
}

Dtype ReadDtype(const Reader& r, const json& m, const std::string& path) {
  return *DtypeFromName(r.String(m, "dtype", path, {"fp32", "tf32", "fp16", "bf16", "fp8"}, "fp32"));
}

// /training/gradient_dtype: fp32, or the weights' own half precision (bf16
// for FP8 training, whose weights are BF16 outside the GEMMs).
Dtype GradientDtype(const Reader& r, const json& t, Dtype model) {
  const Dtype fallback = DefaultGradientDtype(model);
  const Dtype d = *DtypeFromName(r.String(t, "gradient_dtype", "/training", {"fp32", "fp16", "bf16"},
                                         std::string(DtypeName(fallback))));
  const Dtype own = !HalfStorage(model) ? Dtype::kFp32 : model == Dtype::kFp8 ? Dtype::kBf16 : model;
  if (d != Dtype::kFp32 && d != own) {
    r.Fail("/training/gradient_dtype", fmt::format("{} gradients of {} weights: expected fp32 or the weights' own "
                                                   "precision ({})",
                                                   DtypeName(d), DtypeName(model), DtypeName(own)));
  }
  return d;
}

void LoadExplicitModel(const Reader& r, const json& m, Config& c) {
  r.Keys(m, "/model", {"layers", "edges", "dtype", "input_bytes"});
  c.model.dtype = ReadDtype(r, m, "/model");
  const json& layers = m["layers"];
  if (!layers.is_array() || layers.empty()) r.Fail("/model/layers", "expected a non-empty array of layer objects");
  std::vector<Layer> given;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string p = fmt::format("/model/layers/{}", i);
    const json& l = layers[i];
    if (!l.is_object()) r.Fail(p, "expected a layer object");
    r.Keys(l, p, {"name", "kind", "fwd_flops", "bwd_input_flops", "bwd_weight_flops", "params",
                  "out_bytes", "stash_bytes", "cost"});
    Layer layer;
    layer.name = r.String(l, "name", p, {}, fmt::format("layer{}", i));
    layer.kind = r.String(l, "kind", p, {}, "explicit");
    layer.fwd_flops = r.Number(l, "fwd_flops", p, 0, kMaxCount * 1e6);
    layer.bwd_input_flops = r.Number(l, "bwd_input_flops", p, 0, kMaxCount * 1e6, layer.fwd_flops);
    layer.bwd_weight_flops = r.Number(l, "bwd_weight_flops", p, 0, kMaxCount * 1e6, layer.fwd_flops);
    layer.params = r.Number(l, "params", p, 0, kMaxCount, 0.0);
    layer.out_bytes = r.Number(l, "out_bytes", p, 0, kMaxCount);
    layer.stash_bytes = r.Number(l, "stash_bytes", p, 0, kMaxCount, layer.out_bytes);
    if (l.contains("cost")) layer.cost = r.Number(l, "cost", p, 0, kMaxCount * 1e6);
    given.push_back(layer);
  }
  const int L = static_cast<int>(given.size());
  bool any_cost = false, all_cost = true;
  for (const auto& l : given) {
    any_cost = any_cost || l.cost.has_value();
    all_cost = all_cost && l.cost.has_value();
  }
  if (any_cost && !all_cost) {
    for (int i = 0; i < L; ++i) {
      if (!given[i].cost) r.Fail(fmt::format("/model/layers/{}", i), "missing 'cost': give a cost for every layer or for none");
    }
  }
  c.model.input_bytes = r.Number(m, "input_bytes", "/model", 0, kMaxCount, given.front().out_bytes);
  if (!m.contains("edges")) {
    c.model.layers = std::move(given);
    return;
  }
  // A layer graph: check the edges, then linearise in topological order
  // (the given order when it already is one).
  const json& edges = m["edges"];
  if (!edges.is_array()) r.Fail("/model/edges", "expected an array of [from, to] layer index pairs");
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph g(L);
  std::vector<std::pair<int, int>> pairs;
  std::map<std::pair<int64_t, int64_t>, size_t> edge_index;  // an edge: where it was given
  bool ordered = true;
  for (size_t i = 0; i < edges.size(); ++i) {
    const std::string p = fmt::format("/model/edges/{}", i);
    const json& e = edges[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer()) {
      r.Fail(p, "expected [from, to] with two layer indices");
    }
    const int64_t from = e[0].get<int64_t>(), to = e[1].get<int64_t>();
    if (from < 0 || from >= L || to < 0 || to >= L || from == to) {
      r.Fail(p, fmt::format("expected two different layer indices 0..{}, got [{}, {}]", L - 1, from, to));
    }
    // Twice, its bytes would cross a cut twice.
    if (auto [seen, fresh] = edge_index.emplace(std::pair<int64_t, int64_t>(from, to), i); !fresh) {
      r.Fail(p, fmt::format("[{}, {}] is /model/edges/{} again", from, to, seen->second));
    }
    boost::add_edge(static_cast<size_t>(from), static_cast<size_t>(to), g);
    pairs.emplace_back(static_cast<int>(from), static_cast<int>(to));
    ordered = ordered && from < to;
  }
  std::vector<int> order(L);
  for (int i = 0; i < L; ++i) order[i] = i;
  if (!ordered) {
    std::vector<size_t> reversed;
    try {
      boost::topological_sort(g, std::back_inserter(reversed));
    } catch (const boost::not_a_dag&) {
      r.Fail("/model/edges", "the layer graph has a cycle; expected a directed acyclic graph");
    }
    order.assign(reversed.rbegin(), reversed.rend());
  }
  std::vector<int> position(L);
  for (int i = 0; i < L; ++i) position[order[i]] = i;
  for (int i = 0; i < L; ++i) c.model.layers.push_back(given[order[i]]);
  for (auto& [from, to] : pairs) c.model.edges.emplace_back(position[from], position[to]);
}

void LoadModel(const Reader& r, const json& root, Config& c) {
  const json& m = r.Object(root, "model", "");
  if (m.contains("layers") && m["layers"].is_array()) {
    if (m.contains("generator")) r.Fail("/model", "give either 'generator' or a 'layers' list, not both");
    LoadExplicitModel(r, m, c);
    return;
  }
  c.generator = r.String(m, "generator", "/model", {"transformer", "mlp", "cnn"}, std::nullopt);
  const std::string p = "/model";
  constexpr int64_t kBig = 1 << 24;
  if (c.generator == "transformer") {
    r.Keys(m, p, {"generator", "layers", "d_model", "ffn", "heads", "seq", "vocab", "causal", "dtype", "kv_heads",
                  "mlp", "norm", "position", "bias", "tied_embeddings", "attention", "experts", "top_k", "moe_ffn",
                  "shared_experts", "moe_every", "capacity_factor", "grouped_gemm", "routing_skew", "moe_first_dense",
                  "dispatcher", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_rope_head_dim", "v_head_dim"});
    TransformerSpec t;
    t.layers = static_cast<int>(r.Int(m, "layers", p, 1, kBig));
    t.d_model = static_cast<int>(r.Int(m, "d_model", p, 1, kBig));
    t.ffn = static_cast<int>(r.Int(m, "ffn", p, 1, kBig, 4 * int64_t{t.d_model}));
    t.heads = static_cast<int>(r.Int(m, "heads", p, 1, kBig));
    t.seq = static_cast<int>(r.Int(m, "seq", p, 1, kBig));
    t.vocab = static_cast<int>(r.Int(m, "vocab", p, 1, kBig));
    t.causal = r.Bool(m, "causal", p, false);
    t.dtype = ReadDtype(r, m, p);
    if (t.d_model % t.heads != 0) {
      r.Fail(p + "/heads", fmt::format("{} heads do not divide d_model {}", t.heads, t.d_model));
    }
    t.kv_heads = static_cast<int>(r.Int(m, "kv_heads", p, 1, kBig, t.heads));
    if (t.heads % t.kv_heads != 0) {
      r.Fail(p + "/kv_heads", fmt::format("expected a divisor of the {} heads (each K/V head serves a whole group of "
                                          "query heads), got {}", t.heads, t.kv_heads));
    }
    t.mlp = r.Enum(m, "mlp", p, kMlpKindNames, MlpKind::kGelu);
    t.norm = r.Enum(m, "norm", p, kNormKindNames, NormKind::kLayerNorm);
    t.position = r.Enum(m, "position", p, kPositionKindNames, PositionKind::kLearned);
    t.bias = r.Bool(m, "bias", p, true);
    t.tied_embeddings = r.Bool(m, "tied_embeddings", p, false);
    t.attention = r.Enum(m, "attention", p, kAttentionKindNames, AttentionKind::kUnfused);
    // Multi-head latent attention: every field but `kv_lora_rank` describes it.
    t.kv_lora_rank = static_cast<int>(r.Int(m, "kv_lora_rank", p, 0, kBig, 0));
    if (t.kv_lora_rank == 0) {
      for (const char* key : {"q_lora_rank", "qk_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
        if (m.contains(key)) {
          r.Fail(p + "/" + key, "describes multi-head latent attention, but /model/kv_lora_rank is not given (or 0: "
                                "the block's own attention)");
        }
      }
    } else {
      t.q_lora_rank = static_cast<int>(r.Int(m, "q_lora_rank", p, 0, kBig, 0));
      t.qk_head_dim = static_cast<int>(r.Int(m, "qk_head_dim", p, 1, kBig, t.d_model / std::max(1, t.heads)));
      t.qk_rope_head_dim = static_cast<int>(r.Int(m, "qk_rope_head_dim", p, 0, kBig, 64));
      t.v_head_dim = static_cast<int>(r.Int(m, "v_head_dim", p, 1, kBig, t.d_model / std::max(1, t.heads)));
      if (t.attention != AttentionKind::kFused) {
        r.Fail(p + "/kv_lora_rank", "multi-head latent attention runs in a fused attention kernel: set "
                                    "/model/attention to \"fused\"");
      }
      if (t.kv_heads != t.heads) {
        r.Fail(p + "/kv_heads", fmt::format("multi-head latent attention gives every one of the {} heads its own K and "
                                            "V (from the shared latent), so kv_heads must be {} or absent, got {}",
                                            t.heads, t.heads, t.kv_heads));
      }
    }
    // Mixture of experts: every field but `experts` describes the experts.
    t.experts = static_cast<int>(r.Int(m, "experts", p, 0, 1 << 16, 0));
    if (t.experts == 0) {
      for (const char* key :
           {"top_k", "moe_ffn", "shared_experts", "moe_every", "capacity_factor", "grouped_gemm", "routing_skew",
            "moe_first_dense", "dispatcher"}) {
        if (m.contains(key)) {
          r.Fail(p + "/" + key, fmt::format("describes the experts of a mixture of experts, but /model/experts is "
                                            "not given (or 0: a dense model)"));
        }
      }
    } else {
      t.top_k = static_cast<int>(r.Int(m, "top_k", p, 1, t.experts, 1));
      t.moe_ffn = static_cast<int>(r.Int(m, "moe_ffn", p, 1, kBig, t.ffn));
      t.shared_experts = static_cast<int>(r.Int(m, "shared_experts", p, 0, 1 << 10, 0));
      t.moe_every = static_cast<int>(r.Int(m, "moe_every", p, 1, t.layers, 1));
      t.moe_first_dense = static_cast<int>(r.Int(m, "moe_first_dense", p, 0, t.layers - 1, 0));
      t.capacity_factor = r.Number(m, "capacity_factor", p, 0, 1024, 0.0);
      t.grouped_gemm = r.Bool(m, "grouped_gemm", p, true);
      t.routing_skew = r.Number(m, "routing_skew", p, 0, std::max(0, t.experts - 1), 0.0);
      t.dispatcher = r.Enum(m, "dispatcher", p, kMoeDispatcherNames, MoeDispatcher::kAllToAll);
      if (t.routing_skew > 0 && t.capacity_factor > 0) {
        r.Fail(p + "/routing_skew", fmt::format("skews dropless routing; with /model/capacity_factor {} every expert "
                                                "runs its padded capacity whatever the routing (set it to 0 to skew)",
                                                t.capacity_factor));
      }
    }
    c.transformer = t;
    c.model = GenerateTransformer(t);
  } else if (c.generator == "mlp") {
    r.Keys(m, p, {"generator", "layers", "width", "input", "classes", "norm", "residual", "dtype"});
    MlpSpec s;
    s.layers = static_cast<int>(r.Int(m, "layers", p, 2, kBig));
    s.width = static_cast<int>(r.Int(m, "width", p, 1, kBig));
    s.input = static_cast<int>(r.Int(m, "input", p, 1, kBig));
    s.classes = static_cast<int>(r.Int(m, "classes", p, 2, kBig));
    const std::string norm = r.String(m, "norm", p, {"none", "layernorm", "batchnorm"}, "none");
    s.norm = norm == "layernorm" ? Norm::kLayerNorm : norm == "batchnorm" ? Norm::kBatchNorm : Norm::kNone;
    s.residual = r.Bool(m, "residual", p, false);
    s.dtype = ReadDtype(r, m, p);
    c.mlp = s;
    c.model = GenerateMlp(s);
  } else {
    r.Keys(m, p, {"generator", "layers", "channels", "image", "in_channels", "classes", "reductions", "dtype"});
    CnnSpec s;
    s.layers = static_cast<int>(r.Int(m, "layers", p, 1, 1 << 16));
    s.channels = static_cast<int>(r.Int(m, "channels", p, 1, 1 << 16));
    s.image = static_cast<int>(r.Int(m, "image", p, 1, 1 << 16));
    s.in_channels = static_cast<int>(r.Int(m, "in_channels", p, 1, 1 << 16, 3));
    s.classes = static_cast<int>(r.Int(m, "classes", p, 2, kBig));
    s.reductions = static_cast<int>(r.Int(m, "reductions", p, 0, 30, 3));
    s.dtype = ReadDtype(r, m, p);
    if (s.reductions > s.layers) {
      r.Fail(p + "/reductions", fmt::format("{} reductions need at least as many layers, got {}", s.reductions, s.layers));
    }
    c.cnn = s;
    c.model = GenerateCnn(s);
  }
}

Device ReadCustomDevice(const Reader& r, const json& d, const std::string& p) {
  if (!d.is_object()) r.Fail(p, "expected a device object");
  r.Keys(d, p, {"name", "fp32_flops", "tf32_flops", "half_flops", "fp8_flops", "memory_bandwidth", "memory_bytes",
                "launch_overhead_s", "kernel_launch_s", "kernel_floor_s", "sm_count", "simt_half_flops",
                "gemm_efficiency", "bandwidth_efficiency", "comm_on_compute", "fp8_gemm_ratio", "drift",
                "overlap_interference", "epilogue_store"});
  Device dev;
  dev.name = r.String(d, "name", p, {}, std::nullopt);
  dev.fp32_flops = r.Number(d, "fp32_flops", p, 0, 1e20, std::nullopt, true);
  dev.tf32_flops = r.Number(d, "tf32_flops", p, 0, 1e20, dev.fp32_flops, true);
  dev.half_flops = r.Number(d, "half_flops", p, 0, 1e20, dev.fp32_flops, true);
  dev.fp8_flops = r.Number(d, "fp8_flops", p, 0, 1e20, 0.0);
  dev.memory_bandwidth = r.Number(d, "memory_bandwidth", p, 0, 1e16, std::nullopt, true);
  dev.memory_bytes = r.Number(d, "memory_bytes", p, 0, 1e16, std::nullopt, true);
  dev.launch_overhead_s = r.Number(d, "launch_overhead_s", p, 0, 1, 0.0);
  dev.kernel_launch_s = r.Number(d, "kernel_launch_s", p, 0, 1, 0.0);
  dev.kernel_floor_s = r.Number(d, "kernel_floor_s", p, 0, 1, 0.0);
  dev.sm_count = static_cast<int>(r.Number(d, "sm_count", p, 0, 1e6, 0.0));
  dev.simt_half_flops = r.Number(d, "simt_half_flops", p, 0, 1e20, 0.0);
  dev.gemm_efficiency = r.Number(d, "gemm_efficiency", p, 0, 1, dev.gemm_efficiency, true);
  dev.bandwidth_efficiency = r.Number(d, "bandwidth_efficiency", p, 0, 1, dev.bandwidth_efficiency, true);
  dev.comm_on_compute = r.Bool(d, "comm_on_compute", p, false);
  dev.fp8_gemm_ratio = r.Number(d, "fp8_gemm_ratio", p, 0, 1, 1.0, true);
  dev.drift = r.Number(d, "drift", p, 0, 1, 0.0);
  dev.overlap_interference = r.Number(d, "overlap_interference", p, 0, 1, 0.0);
  dev.epilogue_store = r.Number(d, "epilogue_store", p, 0, 1, 0.0);
  return dev;
}

Link ReadCustomLink(const Reader& r, const json& l, const std::string& p) {
  if (!l.is_object()) r.Fail(p, "expected a link object");
  r.Keys(l, p, {"name", "latency_s", "bandwidth", "host_staged", "contention", "collective_efficiency",
                "collective_latency_s"});
  Link link;
  link.name = r.String(l, "name", p, {}, std::nullopt);
  link.latency_s = r.Number(l, "latency_s", p, 0, 10);
  link.bandwidth = r.Number(l, "bandwidth", p, 0, 1e16, std::nullopt, true);
  link.host_staged = r.Bool(l, "host_staged", p, false);
  link.contention = *ContentionFromName(r.String(l, "contention", p, {"pair", "host", "device"}, "pair"));
  link.collective_efficiency = r.Number(l, "collective_efficiency", p, 0, 1, link.collective_efficiency, true);
  link.collective_latency_s = r.Number(l, "collective_latency_s", p, 0, 10, 0.0);
  return link;
}

void LoadCluster(const Reader& r, const json& root, Config& c) {
  const json& cl = r.Object(root, "cluster", "");
  const std::string p = "/cluster";
  r.Keys(cl, p, {"device", "devices", "link", "efficiency", "custom_devices", "custom_links", "gpus_per_node",
                 "inter_node_link", "placement", "gpus"});
  std::vector<Device> custom_devices;
  std::vector<Link> custom_links;
  for (const char* key : {"custom_devices", "custom_links"}) {
    if (!cl.contains(key)) continue;
    if (!cl[key].is_array()) r.Fail(p + "/" + key, "expected an array of objects");
    for (size_t i = 0; i < cl[key].size(); ++i) {
      const std::string ip = fmt::format("{}/{}/{}", p, key, i);
      // A name is looked up custom first, then in the catalogue (which
      // ignores case): one that is a catalogue's, or given twice, would
      // shadow or be shadowed silently.
      auto unique = [&](const std::string& name, bool taken_in_catalogue, const auto& earlier, const char* what) {
        if (name.empty()) r.Fail(ip + "/name", fmt::format("expected a non-empty name for the custom {}", what));
        if (taken_in_catalogue) {
          r.Fail(ip + "/name", fmt::format("'{}' is the catalogue's {}: give the custom one a name of its own", name,
                                           what));
        }
        for (const auto& e : earlier) {
          if (e.name == name) r.Fail(ip + "/name", fmt::format("'{}' names an earlier custom {} too", name, what));
        }
      };
      if (std::string_view(key) == "custom_devices") {
        Device d = ReadCustomDevice(r, cl[key][i], ip);
        unique(d.name, FindDevice(d.name) != nullptr, custom_devices, "device");
        custom_devices.push_back(std::move(d));
      } else {
        Link l = ReadCustomLink(r, cl[key][i], ip);
        unique(l.name, FindLink(l.name) != nullptr, custom_links, "link");
        custom_links.push_back(std::move(l));
      }
    }
  }
  auto find_device = [&](const std::string& name, const std::string& path) {
    for (const auto& d : custom_devices) {
      if (d.name == name) return d;
    }
    if (const Device* d = FindDevice(name)) return *d;
    r.Fail(path, fmt::format("unknown device '{}': expected one of {} or a custom_devices name", name, DeviceNames()));
  };
  const int devices =
      static_cast<int>(r.Int(cl, "devices", p, 1, 1 << 20, c.pipeline.stages * c.pipeline.tensor_parallel));
  auto it = cl.find("device");
  if (it == cl.end()) r.Fail(p, fmt::format("missing key 'device' (one of {})", DeviceNames()));
  if (it->is_string()) {
    c.cluster.devices.assign(devices, find_device(it->get<std::string>(), p + "/device"));
  } else if (it->is_array()) {
    if (static_cast<int>(it->size()) != devices) {
      r.Fail(p + "/device", fmt::format("lists {} devices, expected one per device ({})", it->size(), devices));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string ip = fmt::format("{}/device/{}", p, i);
      if (!(*it)[i].is_string()) r.Fail(ip, "expected a device name");
      c.cluster.devices.push_back(find_device((*it)[i].get<std::string>(), ip));
    }
  } else {
    r.Fail(p + "/device", "expected a device name or an array of names, one per device");
  }
  auto find_link = [&](const std::string& key, const std::string& fallback) {
    const std::string name = r.String(cl, key, p, {}, fallback);
    for (const auto& l : custom_links) {
      if (l.name == name) return l;
    }
    const Link* l = FindLink(name);
    if (!l) {
      r.Fail(p + "/" + key, fmt::format("unknown link '{}': expected one of {} or a custom_links name", name, LinkNames()));
    }
    return *l;
  };
  c.cluster.link = find_link("link", "nvlink4");
  c.cluster.inter_node_link = find_link("inter_node_link", "ib-hdr");
  c.cluster.gpus_per_node = static_cast<int>(r.Int(cl, "gpus_per_node", p, 1, 1 << 20, devices));
  c.cluster.rank_order = r.Enum(cl, "placement", p, kRankOrderNames, RankOrder::kPipelineFirst);
  if (cl.contains("gpus")) {
    c.cluster.gpus = static_cast<int>(r.Int(cl, "gpus", p, 1, devices, devices));
    if (c.cluster.gpus < devices && c.GpusPerDevice() > 1) {
      r.Fail(p + "/gpus", "devices sharing a GPU need tensor_parallel and context_parallel 1");
    }
  }
  if (cl.contains("efficiency")) c.cluster.efficiency = r.Number(cl, "efficiency", p, 0, 1, 0.5, true);
}

// Reads the config `root` with `r`; `source` is what the config's later
// messages (the partitioner's, the planner's) name it by.
Config Load(const Reader& r, const json& root, std::string source) {
  if (!root.is_object()) r.Fail("", "expected an object with model, training, pipeline and cluster");
  r.Keys(root, "", {"model", "training", "pipeline", "cluster"});
  Config c;
  c.source = std::move(source);
  LoadModel(r, root, c);
  const int L = static_cast<int>(c.model.layers.size());

  const json& t = r.Object(root, "training", "");
  r.Keys(t, "/training", {"batch", "microbatches", "optimizer", "bytes_per_param", "learning_rate",
                          "momentum", "seed", "steps", "data_parallel_sharding", "fp8_params", "gradient_dtype"});
  c.training.batch = r.Int(t, "batch", "/training", 1, int64_t{1} << 40);
  c.training.micro_batches = static_cast<int>(r.Int(t, "microbatches", "/training", 1, 1 << 24));
  if (c.training.batch % c.training.micro_batches != 0) {
    r.Fail("/training/microbatches", fmt::format("{} micro-batches do not divide the batch of {} samples",
                                                 c.training.micro_batches, c.training.batch));
  }
  c.training.optimizer = r.String(t, "optimizer", "/training", {"adam", "sgd"}, "adam");
  c.training.bytes_per_param = r.Number(t, "bytes_per_param", "/training", 0, 1024, 12.0);
  c.training.sharding =
      r.Enum(t, "data_parallel_sharding", "/training", kDataParallelShardingNames, DataParallelSharding::kNone);
  c.training.fp8_params = r.Bool(t, "fp8_params", "/training", false);
  if (c.training.fp8_params && c.model.dtype != Dtype::kFp8) {
    r.Fail("/training/fp8_params", fmt::format("FP8 weights need FP8 training: /model/dtype is {}, not fp8",
                                               DtypeName(c.model.dtype)));
  }
  if (t.contains("gradient_dtype") && !c.transformer) {
    r.Fail("/training/gradient_dtype", "only a generated transformer's weight-gradient kernels keep their gradients "
                                       "at a set precision: leave it out (the default is Megatron-LM's)");
  }
  c.training.gradient_dtype = GradientDtype(r, t, c.model.dtype);
  if (c.transformer && c.transformer->GradientDtype() != c.training.gradient_dtype) {
    c.transformer->gradient_dtype = c.training.gradient_dtype;
    c.model = GenerateTransformer(*c.transformer);
  }
  c.training.learning_rate = r.Number(t, "learning_rate", "/training", 0, 1e6, 1e-3);
  c.training.momentum = r.Number(t, "momentum", "/training", 0, 1, 0.9);
  c.training.seed = r.Int(t, "seed", "/training", 0, int64_t{1} << 62, 1);
  c.training.steps = static_cast<int>(r.Int(t, "steps", "/training", 1, 1 << 24, 1));

  const json& pl = r.Object(root, "pipeline", "");
  r.Keys(pl, "/pipeline", {"stages", "schedule", "chunks", "recompute", "partition", "first_layers", "tensor_parallel",
                           "sequence_parallel", "memory_cap", "p2p", "recompute_timing", "context_parallel", "expert_parallel",
                           "expert_tensor_parallel",
                           "tp_comm_overlap", "account_for_embedding", "account_for_loss", "recompute_granularity",
                           "distribute_saved_activations"});
  c.pipeline.stages = static_cast<int>(r.Int(pl, "stages", "/pipeline", 1, 1 << 20));
  if (c.pipeline.stages > L) {
    r.Fail("/pipeline/stages", fmt::format("{} stages but the model has only {} layers", c.pipeline.stages, L));
  }
  c.pipeline.schedule = r.String(pl, "schedule", "/pipeline", ir::ScheduleNames(), "gpipe");
  c.pipeline.chunks = static_cast<int>(r.Int(pl, "chunks", "/pipeline", 1, 1 << 16, 0));
  c.pipeline.memory_cap = r.Number(pl, "memory_cap", "/pipeline", 1, 1e18, 0.0);
  const int chunks = c.pipeline.Chunks();
  // The builders' own rules (ir/builders.h), at the field each one is about.
  if (auto problem = ir::FindShapeProblem(c.pipeline.schedule, c.pipeline.stages, c.training.micro_batches, chunks)) {
    r.Fail(ShapeParameterPath(problem->parameter), problem->message);
  }
  if (static_cast<int64_t>(c.pipeline.stages) * chunks > L) {
    r.Fail("/pipeline/chunks", fmt::format("{} devices x {} chunks = {} stages but the model has only {} layers",
                                           c.pipeline.stages, chunks, c.pipeline.stages * chunks, L));
  }
  c.pipeline.recompute = *ir::RecomputeModeFromName(
      r.String(pl, "recompute", "/pipeline", {"none", "full", "except-last", "selective"}, "full"));
  c.pipeline.tensor_parallel = static_cast<int>(r.Int(pl, "tensor_parallel", "/pipeline", 1, 1 << 16, 1));
  c.pipeline.sequence_parallel = r.Bool(pl, "sequence_parallel", "/pipeline", false);
  c.pipeline.context_parallel = static_cast<int>(r.Int(pl, "context_parallel", "/pipeline", 1, 1 << 16, 1));
  c.pipeline.tp_comm_overlap = r.Bool(pl, "tp_comm_overlap", "/pipeline", false);
  c.pipeline.expert_parallel = static_cast<int>(r.Int(pl, "expert_parallel", "/pipeline", 1, 1 << 16, 1));
  c.pipeline.expert_tensor_parallel =
      static_cast<int>(r.Int(pl, "expert_tensor_parallel", "/pipeline", 1, 1 << 16, c.pipeline.tensor_parallel));
  if (c.pipeline.tensor_parallel % c.pipeline.expert_tensor_parallel != 0) {
    r.Fail("/pipeline/expert_tensor_parallel",
           fmt::format("expected a divisor of tensor_parallel {} (each expert is split over part of the "
                       "tensor-parallel group), got {}", c.pipeline.tensor_parallel, c.pipeline.expert_tensor_parallel));
  }
  // Following tensor_parallel unless given (search varies t).
  if (!pl.contains("expert_tensor_parallel")) c.pipeline.expert_tensor_parallel = 0;
  c.pipeline.blocking_p2p = r.String(pl, "p2p", "/pipeline", {"overlapped", "blocking"}, "overlapped") == "blocking";
  c.pipeline.recompute_timing = *ir::RecomputeTimingFromName(
      r.String(pl, "recompute_timing", "/pipeline", {"overlapped", "in-backward"}, "overlapped"));
  const bool selective = c.pipeline.recompute == ir::RecomputeMode::kSelective;
  const int tp = c.pipeline.tensor_parallel;
  // What a recomputed micro-batch keeps (memory_model.h's Checkpointing).
  c.pipeline.checkpointing.granularity =
      r.Enum(pl, "recompute_granularity", "/pipeline", kRecomputeGranularityNames, RecomputeGranularity::kCell);
  c.pipeline.checkpointing.distribute_saved_activations =
      r.Bool(pl, "distribute_saved_activations", "/pipeline", false);
  if (c.pipeline.checkpointing.distribute_saved_activations) {
    if (c.pipeline.checkpointing.granularity != RecomputeGranularity::kLayer) {
      r.Fail("/pipeline/distribute_saved_activations", "distributes the inputs each layer keeps: it needs "
                                                       "recompute_granularity 'layer'");
    }
    if (tp == 1) {
      r.Fail("/pipeline/distribute_saved_activations", "distributes over the tensor-parallel group: it needs "
                                                       "tensor_parallel > 1");
    } else if (c.pipeline.sequence_parallel) {
      // Megatron-Core's TransformerConfig refuses the two together.
      r.Fail("/pipeline/distribute_saved_activations", "sequence parallelism already splits the inputs each layer "
                                                       "keeps over the tensor-parallel group: set one of them false");
    }
  }
  if ((tp > 1 || c.pipeline.sequence_parallel || selective) && !c.transformer) {
    r.Fail(tp > 1 ? "/pipeline/tensor_parallel" : selective ? "/pipeline/recompute" : "/pipeline/sequence_parallel",
           "tensor parallelism, sequence parallelism and selective recompute are modelled for the transformer "
           "generator only");
  }
  if (c.pipeline.sequence_parallel && tp == 1) {
    r.Fail("/pipeline/sequence_parallel", "sequence parallelism shards along the tensor-parallel group: it needs "
                                          "tensor_parallel > 1");
  }
  // Megatron-Core refuses to train an MoE layer with tensor parallelism but
  // no sequence parallelism (moe_layer.py); its all-to-all dispatcher routes
  // each GPU's shard of the tokens.
  if (c.transformer && c.transformer->experts > 1 && tp > 1 && !c.pipeline.sequence_parallel) {
    r.Fail("/pipeline/sequence_parallel", "a mixture of experts with tensor_parallel > 1 needs sequence parallelism "
                                          "(Megatron-Core's MoE layer trains only with it): set it to true");
  }
  const int cp = c.pipeline.context_parallel;
  if (c.pipeline.tp_comm_overlap && !c.pipeline.sequence_parallel) {
    r.Fail("/pipeline/tp_comm_overlap", "Transformer Engine overlaps the all-gathers and reduce-scatters of sequence "
                                        "parallelism: it needs sequence_parallel (and tensor_parallel > 1)");
  }
  if (cp > 1) {
    if (!c.transformer) {
      r.Fail("/pipeline/context_parallel", "context parallelism is modelled for the transformer generator only");
    }
    if (c.transformer->attention != AttentionKind::kFused) {
      r.Fail("/pipeline/context_parallel", "context parallelism runs through a fused attention kernel (Transformer "
                                           "Engine's): set /model/attention to \"fused\"");
    }
    // Megatron splits a causal sequence into 2c chunks (each GPU one early, one late).
    const int chunks_of_seq = c.transformer->causal ? 2 * cp : cp;
    if (c.transformer->seq % chunks_of_seq != 0) {
      r.Fail("/pipeline/context_parallel",
             fmt::format("{} GPUs need the sequence of {} tokens (/model/seq) in {} equal chunks{}", cp,
                         c.transformer->seq, chunks_of_seq, c.transformer->causal ? " (2 per GPU, causal)" : ""));
    }
  }

  if (c.transformer) {
    if (c.transformer->heads % tp != 0) {
      r.Fail("/pipeline/tensor_parallel", fmt::format("{} GPUs do not divide the {} heads (/model/heads)", tp,
                                                      c.transformer->heads));
    }
    if (c.transformer->kv_heads % tp != 0) {
      r.Fail("/model/kv_heads", fmt::format("expected a multiple of tensor_parallel {} (/pipeline/tensor_parallel: "
                                            "each GPU holds whole K/V heads), got {}", tp, c.transformer->kv_heads));
    }
    if (c.transformer->ffn % tp != 0) {
      r.Fail("/pipeline/tensor_parallel", fmt::format("{} GPUs do not divide the FFN width {} (/model/ffn)", tp,
                                                      c.transformer->ffn));
    }
    if (c.transformer->experts > 0 && c.transformer->moe_ffn % tp != 0) {
      r.Fail("/pipeline/tensor_parallel", fmt::format("{} GPUs do not divide the experts' FFN width {} (/model/moe_ffn: "
                                                      "each expert is split across the tensor-parallel group)", tp,
                                                      c.transformer->moe_ffn));
    }
    if (c.transformer->vocab % tp != 0) {
      r.Fail("/pipeline/tensor_parallel", fmt::format("{} GPUs do not divide the vocabulary of {} (/model/vocab; pad "
                                                      "it as Megatron does)", tp, c.transformer->vocab));
    }
    SetParallelism(c, tp, c.pipeline.sequence_parallel, c.pipeline.recompute);
  }
  c.pipeline.partition = r.Enum(pl, "partition", "/pipeline", kPartitionAlgorithmNames, PartitionAlgorithm::kMinMax);
  if (pl.contains("memory_cap") && !c.pipeline.PlansToMemoryCap()) {
    r.Fail("/pipeline/memory_cap", fmt::format("only the auto schedule and the memory partition plan to a memory cap; "
                                               "this config's schedule is '{}' and its partition '{}'",
                                               c.pipeline.schedule, PartitionAlgorithmName(c.pipeline.partition)));
  }
  if (pl.contains("first_layers")) {
    const json& f = pl["first_layers"];
    if (!f.is_array()) r.Fail("/pipeline/first_layers", "expected an array with the first layer of each cell");
    for (size_t i = 0; i < f.size(); ++i) {
      const std::string ip = fmt::format("/pipeline/first_layers/{}", i);
      if (!f[i].is_number_integer()) r.Fail(ip, fmt::format("expected a layer index, got {}", f[i].dump()));
      c.pipeline.first_layers.push_back(f[i].get<int>());
    }
  }
  c.pipeline.account_for_embedding = r.Bool(pl, "account_for_embedding", "/pipeline", false);
  c.pipeline.account_for_loss = r.Bool(pl, "account_for_loss", "/pipeline", false);
  for (const char* key : {"account_for_embedding", "account_for_loss"}) {
    if (pl.contains(key) && c.pipeline.partition != PartitionAlgorithm::kMegatron) {
      r.Fail(fmt::format("/pipeline/{}", key), "only the megatron partition lays out the embedding and the loss as "
                                               "layers of the split (set /pipeline/partition to \"megatron\")");
    }
  }
  if (c.pipeline.partition == PartitionAlgorithm::kMegatron && !c.transformer) {
    r.Fail("/pipeline/partition", "the megatron partition splits a generated transformer's blocks (an explicit layer "
                                  "list, an MLP or a CNN: use minmax, gpipe, memory or manual)");
  }
  if (pl.contains("first_layers") && c.pipeline.partition != PartitionAlgorithm::kManual) {
    r.Fail("/pipeline/first_layers", fmt::format("only the manual partition cuts at the layers given; this config's "
                                                 "partition is '{}' (set /pipeline/partition to \"manual\")",
                                                 PartitionAlgorithmName(c.pipeline.partition)));
  }
  if (c.pipeline.partition == PartitionAlgorithm::kManual && c.pipeline.first_layers.empty()) {
    r.Fail("/pipeline/first_layers", "partition 'manual' needs the first layer of each cell");
  }

  LoadCluster(r, root, c);
  const int D = c.cluster.NumDevices();
  const int group = tp * cp * c.pipeline.stages;  // GPUs of one pipeline: t x c x K
  const std::string per_stage = tp > 1 && cp > 1 ? fmt::format(" x {} tensor- x {} context-parallel GPUs", tp, cp)
                                : tp > 1         ? fmt::format(" x {} tensor-parallel GPUs", tp)
                                : cp > 1         ? fmt::format(" x {} context-parallel GPUs", cp)
                                                 : "";
  if (group > D) {
    r.Fail(cp > 1 ? "/pipeline/context_parallel" : "/pipeline/stages",
           fmt::format("{} stages{} but only {} devices (/cluster/devices)", c.pipeline.stages, per_stage, D));
  }
  if (D % group != 0) {
    r.Fail("/cluster/devices", per_stage.empty()
                                   ? fmt::format("{} devices are not a whole number of {}-stage pipelines "
                                                 "(data-parallel replicas)", D, c.pipeline.stages)
                                   : fmt::format("{} devices are not a whole number of pipelines of {} stages{} "
                                                 "(data-parallel replicas)", D, c.pipeline.stages, per_stage));
  }
  for (size_t i = 1; i < c.cluster.devices.size(); ++i) {
    if (cp > 1 && c.cluster.devices[i].name != c.cluster.devices[0].name) {
      r.Fail("/cluster/device", "context parallelism is modelled on one device kind: give one device name");
    }
  }
  if (c.model.dtype == Dtype::kFp8) {
    for (size_t i = 0; i < c.cluster.devices.size(); ++i) {
      if (c.cluster.devices[i].fp8_flops > 0) continue;
      r.Fail("/model/dtype", fmt::format("fp8 needs FP8 tensor cores (Hopper and later); device {} ({}) has none "
                                         "(its fp8_flops is 0)", i, c.cluster.devices[i].name));
    }
  }
  if (const int ep = c.pipeline.expert_parallel; ep > 1) {
    const int experts = c.transformer ? c.transformer->experts : 0;
    if (experts < 2) {
      r.Fail("/pipeline/expert_parallel", fmt::format("divides the experts of a mixture of experts over GPUs, but "
                                                      "the model has none (/model/experts {})", experts));
    }
    if (experts % ep != 0) {
      r.Fail("/pipeline/expert_parallel", fmt::format("{} GPUs do not divide the {} experts (/model/experts)", ep,
                                                      experts));
    }
    // The GPUs of one pipeline stage (t x c x replicas) hold et x e x expert
    // data-parallel replicas of the experts.
    const int et = c.pipeline.expert_tensor_parallel > 0 ? c.pipeline.expert_tensor_parallel : tp;
    const int64_t holders = int64_t{c.GradientRanks()} * tp;
    if (holders % (int64_t{ep} * et) != 0) {
      r.Fail("/pipeline/expert_parallel",
             fmt::format("an expert-parallel group of {} GPUs, each expert split over {}, is taken from the {} GPUs of "
                         "a pipeline stage (tensor_parallel x context_parallel x data-parallel replicas), and {} x {} "
                         "does not divide {}", ep, et, holders, ep, et, holders));
    }
  }
  // Megatron's placement: a tensor-parallel group inside one node.
  if (c.cluster.gpus_per_node % tp != 0) {
    r.Fail("/pipeline/tensor_parallel", fmt::format("a tensor-parallel group of {} GPUs must fit inside one node, and "
                                                    "nodes of {} GPUs (/cluster/gpus_per_node) do not hold a whole "
                                                    "number of them", tp, c.cluster.gpus_per_node));
  }
  if (tp > 1) {
    for (size_t i = 1; i < c.cluster.devices.size(); ++i) {
      if (c.cluster.devices[i].name != c.cluster.devices[0].name) {
        r.Fail("/cluster/device", "tensor parallelism is modelled on one device kind: give one device name");
      }
    }
  }
  return c;
}

}  // namespace

void SetParallelism(Config& c, int tensor_parallel, bool sequence_parallel, ir::RecomputeMode recompute) {
  c.pipeline.tensor_parallel = tensor_parallel;
  c.pipeline.sequence_parallel = sequence_parallel;
  c.pipeline.recompute = recompute;
  if (!c.transformer) return;
  TransformerSpec& t = *c.transformer;
  const bool selective = recompute == ir::RecomputeMode::kSelective;
  const bool overlap = c.pipeline.tp_comm_overlap && sequence_parallel;
  if (t.tensor_parallel != tensor_parallel || t.sequence_parallel != sequence_parallel ||
      t.selective_recompute != selective || t.context_parallel != c.pipeline.context_parallel ||
      t.tp_comm_overlap != overlap || t.expert_parallel != c.pipeline.expert_parallel ||
      t.expert_tensor_parallel != c.pipeline.expert_tensor_parallel) {
    t.tensor_parallel = tensor_parallel;
    t.sequence_parallel = sequence_parallel;
    t.selective_recompute = selective;
    t.context_parallel = c.pipeline.context_parallel;
    t.expert_parallel = c.pipeline.expert_parallel;
    t.expert_tensor_parallel = c.pipeline.expert_tensor_parallel;
    t.tp_comm_overlap = overlap;
    c.model = GenerateTransformer(t);
  }
}

namespace {

// Distinct nodes among the GPUs gpu(i) for i in [0, n), which ascend with i.
template <typename Gpu>
int CountNodes(int64_t n, int64_t per_node, Gpu&& gpu) {
  int nodes = 0;
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t node = gpu(i) / per_node;
    nodes += node != last;
    last = node;
  }
  return nodes;
}

}  // namespace

int64_t BlockNodes(int64_t first, int64_t stride, int64_t blocks, int64_t span, int64_t per_node) {
  if (blocks <= 0) return 0;
  const int64_t P = per_node;
  // With m = a block's first GPU mod P: the nodes it spans, and whether the
  // next block (stride on) starts in the node it ends in; both depend on m
  // alone, and m repeats every P / gcd(stride mod P, P) blocks.
  const int64_t step = ((stride % P) + P) % P, period = P / std::gcd(step == 0 ? P : step, P);
  const int64_t m0 = ((first % P) + P) % P;
  int64_t nodes = 0;
  for (int64_t k = 0; k < std::min(period, blocks); ++k) {
    const int64_t m = (m0 + k * step) % P;
    const int64_t spanned = (m + span) / P + 1, shared = (m + span) / P == (m + stride) / P ? 1 : 0;
    const int64_t count = (blocks - 1 - k) / period + 1;            // blocks r < blocks with r = k mod period
    const int64_t followed = k < blocks - 1 ? (blocks - 2 - k) / period + 1 : 0;  // of them, those with a next block
    nodes += count * spanned - followed * shared;
  }
  return nodes;
}

int Config::ContextNodes() const {
  return CountNodes(pipeline.context_parallel, cluster.gpus_per_node, [&](int64_t j) { return GpuOf(j, 0, 0); });
}

int Config::ExpertNodes() const {
  // The GPUs of pipeline device 0 in the order tensor, context, replica;
  // the group's members et apart.
  const int64_t t = pipeline.tensor_parallel, c = pipeline.context_parallel;
  const int64_t et = pipeline.expert_tensor_parallel > 0 ? pipeline.expert_tensor_parallel : t;
  return CountNodes(pipeline.expert_parallel, cluster.gpus_per_node, [&](int64_t i) {
    const int64_t j = i * et;
    return GpuOf(static_cast<int>((j / t) % c), 0, static_cast<int>(j / (t * c))) + j % t;
  });
}

int Config::GradientNodes(int device) const {
  const int64_t c = pipeline.context_parallel, t = pipeline.tensor_parallel, per_node = cluster.gpus_per_node;
  const int64_t replicas = Replicas();
  if (t > per_node) {  // a tensor-parallel group wider than a node: no closed form below
    return CountNodes(c * replicas, per_node,
                      [&](int64_t i) { return GpuOf(static_cast<int>(i % c), device, static_cast<int>(i / c)); });
  }
  // Replica r's c GPUs are t apart from GpuOf(0, device, r); replica-first
  // order puts the replicas' runs end to end (one run of c x replicas).
  const int64_t first = GpuOf(0, device, 0);
  if (cluster.rank_order != RankOrder::kPipelineFirst) return BlockNodes(first, 0, 1, t * (c * replicas - 1), per_node);
  return BlockNodes(first, GpuOf(0, device, 1) - first, replicas, t * (c - 1), per_node);
}

CollectiveLinks LinksOf(const Config& c) {
  return CollectiveLinks{.intra = &c.cluster.link,
                         .inter = &c.cluster.inter_node_link,
                         .context_nodes = static_cast<double>(c.ContextNodes()),
                         .data_nodes = static_cast<double>(c.GradientNodes(0)),
                         .expert_nodes = static_cast<double>(c.ExpertNodes())};
}

double ModelParameters(const Config& config) {
  auto sum = [](const Model& m) {
    double params = 0;
    for (const Layer& l : m.layers) params += l.params;
    return params;
  };
  if (!config.transformer || config.transformer->tensor_parallel == 1) return sum(config.model);
  TransformerSpec whole = *config.transformer;
  whole.tensor_parallel = 1;
  whole.sequence_parallel = false;
  return sum(GenerateTransformer(whole));
}

Config CopyWithoutDevices(const Config& c) {
  return Config{.source = c.source,
                .generator = c.generator,
                .transformer = c.transformer,
                .mlp = c.mlp,
                .cnn = c.cnn,
                .model = c.model,
                .training = c.training,
                .pipeline = c.pipeline,
                .cluster = {.devices = {},
                            .link = c.cluster.link,
                            .inter_node_link = c.cluster.inter_node_link,
                            .gpus_per_node = c.cluster.gpus_per_node,
                            .gpus = c.cluster.gpus,
                            .rank_order = c.cluster.rank_order,
                            .efficiency = c.cluster.efficiency},
                .gpu_layout = c.gpu_layout};
}

bool Regenerate(Config& c, int layers) {
  if (c.transformer) {
    c.transformer->layers = layers;
    c.model = GenerateTransformer(*c.transformer);
  } else if (c.mlp) {
    c.mlp->layers = layers;
    c.model = GenerateMlp(*c.mlp);
  } else if (c.cnn) {
    c.cnn->layers = layers;
    c.model = GenerateCnn(*c.cnn);
  } else {
    return false;
  }
  return true;
}

Result<Config> LoadConfig(std::string_view text, std::string_view source) {
  return ir::json::TryRead([&] {
    const Reader r{std::string(source)};
    return Load(r, r.Parse(text), std::string(source));
  });
}

Result<Config> LoadConfig(const nlohmann::json& document, std::string_view source, std::string_view path) {
  return ir::json::TryRead([&] {
    return Load(Reader(std::string(source), std::string(path)), document,
                path.empty() ? std::string(source) : fmt::format("{}: {}", source, path));
  });
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Fail(fmt::format("{}: is a directory, not a config", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(fmt::format("{}: cannot open config", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return LoadConfig(buffer.str(), path);
}

}  // namespace twinpipe::cost
