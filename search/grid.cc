#include "search/grid.h"

#include <algorithm>
#include <ranges>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/builders.h"

namespace twinpipe::search {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i <= n; ++i) {
    if (n % i == 0) out.push_back(i);
  }
  return out;
}

// The (stages K, replicas R) that split `groups` tensor x context groups: K
// at most the model's L layers, R dividing the global batch.
std::vector<std::pair<int, int>> PipelineSplits(int groups, int L, int64_t global_batch) {
  std::vector<std::pair<int, int>> out;
  for (int K = 1; K <= std::min(groups, L); ++K) {
    if (groups % K == 0 && global_batch % (groups / K) == 0) out.emplace_back(K, groups / K);
  }
  return out;
}

}  // namespace

Result<cost::Config> ResizeCluster(const cost::Config& c, int devices) {
  if (devices == 0 || devices == c.cluster.NumDevices()) return c;
  const auto& d = c.cluster.devices;
  const bool homogeneous =
      std::all_of(d.begin(), d.end(), [&](const cost::Device& x) { return x.name == d[0].name; });
  if (!homogeneous) {
    return Fail(fmt::format("{}: --devices {}: /cluster/device lists {} devices one by one; search them at that count",
                            c.source, devices, c.cluster.NumDevices()));
  }
  cost::Config resized = c;
  resized.cluster.devices.assign(devices, d[0]);
  return resized;
}

std::vector<int> TensorParallelDegrees(const cost::Config& c, int devices) {
  std::vector<int> out{1};
  if (!c.transformer) return out;
  const cost::TransformerSpec& t = *c.transformer;
  for (int d = 2; d <= std::min(devices, c.cluster.gpus_per_node); ++d) {
    const bool in_a_node = c.cluster.gpus_per_node % d == 0 && devices % d == 0;
    const int kv_heads = t.kv_heads > 0 ? t.kv_heads : t.heads;
    const bool experts_split = t.experts == 0 || t.moe_ffn % d == 0;
    if (in_a_node && t.heads % d == 0 && kv_heads % d == 0 && t.ffn % d == 0 && t.vocab % d == 0 && experts_split) {
      out.push_back(d);
    }
  }
  return out;
}

std::vector<int> ContextParallelDegrees(const cost::Config& c, int devices, int t, const SearchOptions& o) {
  std::vector<int> out{1};
  if (!c.transformer || c.transformer->attention != cost::AttentionKind::kFused || devices % t != 0) return out;
  const auto& d = c.cluster.devices;
  if (!std::all_of(d.begin(), d.end(), [&](const cost::Device& x) { return x.name == d[0].name; })) return out;
  const int seq = c.transformer->seq, pieces_per_gpu = c.transformer->causal ? 2 : 1;
  for (int cp = 2; cp <= devices / t; ++cp) {
    if ((devices / t) % cp != 0 || seq % (pieces_per_gpu * cp) != 0) continue;
    if (o.max_context_parallel > 0 && cp > o.max_context_parallel) break;
    if (o.min_context_tokens > 0 && seq / cp < o.min_context_tokens) break;
    out.push_back(cp);
  }
  return out;
}

std::vector<int> ExpertParallelDegrees(const cost::Config& c, int t, int stage_gpus) {
  const int experts = c.transformer ? c.transformer->experts : 0;
  if (experts < 2) return {1};
  const int et = c.pipeline.expert_tensor_parallel > 0 ? c.pipeline.expert_tensor_parallel : t;
  if (t % et != 0) return {};
  std::vector<int> out;
  for (int e = 1; e <= experts; ++e) {
    if (experts % e == 0 && stage_gpus % (int64_t{e} * et) == 0) out.push_back(e);
  }
  return out;
}

std::vector<int> ChunkChoices(const cost::Config& c, const std::string& schedule, int K, const SearchOptions& o) {
  std::vector<int> out;
  for (int v : ir::ChunkChoices(schedule)) out.push_back(v);
  const int L = static_cast<int>(c.model.layers.size());
  if (schedule == "interleaved") {
    const int blocks = c.transformer ? c.transformer->layers : L;
    if (blocks % K == 0) {
      for (int v = 2; v <= blocks / K; ++v) {
        if ((blocks / K) % v == 0) out.push_back(v);
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    std::erase_if(out, [&](int v) { return o.max_chunks > 0 && v > o.max_chunks; });
  }
  // More chunks than layers leave a stage empty.
  std::erase_if(out, [&](int v) { return v > 1 && (K == 1 || static_cast<int64_t>(K) * v > L); });
  return out;
}

std::vector<Candidate> Grid(const cost::Config& c, int devices, int64_t global_batch, const SearchOptions& o) {
  const int L = static_cast<int>(c.model.layers.size());
  std::vector<cost::PartitionAlgorithm> partitions;
  for (const auto& [name, a] : cost::kPartitionAlgorithmNames) {
    if (a != cost::PartitionAlgorithm::kManual && a != cost::PartitionAlgorithm::kMegatron) partitions.push_back(a);
  }
  std::vector<ir::RecomputeMode> modes{ir::RecomputeMode::kNone, ir::RecomputeMode::kFull,
                                       ir::RecomputeMode::kExceptLast};
  if (c.transformer) modes.push_back(ir::RecomputeMode::kSelective);
  std::vector<cost::DataParallelSharding> sharded;  // beyond none, in the options' order
  for (auto s : o.shardings) {
    if (s != cost::DataParallelSharding::kNone && std::find(sharded.begin(), sharded.end(), s) == sharded.end()) {
      sharded.push_back(s);
    }
  }
  const bool unsharded = o.shardings.empty() ||
                         std::find(o.shardings.begin(), o.shardings.end(), cost::DataParallelSharding::kNone) !=
                             o.shardings.end();
  std::vector<bool> overlaps;
  for (bool overlap : {false, true}) {
    if (std::find(o.tp_comm_overlap.begin(), o.tp_comm_overlap.end(), overlap) != o.tp_comm_overlap.end()) {
      overlaps.push_back(overlap);
    }
  }
  if (overlaps.empty()) overlaps.push_back(false);
  std::vector<Candidate> grid;
  for (int t : TensorParallelDegrees(c, devices)) {
  // A mixture of experts trains with tensor parallelism only beside sequence parallelism (Megatron-Core's rule).
  const bool moe = c.transformer && c.transformer->experts > 1;
  for (bool sp : t > 1 ? (moe ? std::vector<bool>{true} : std::vector<bool>{false, true}) : std::vector<bool>{false}) {
  for (bool overlap : sp ? overlaps : std::vector<bool>{false}) {
  for (int cp : ContextParallelDegrees(c, devices, t, o)) {
  for (const auto& [K, R] : PipelineSplits(devices / (t * cp), L, global_batch)) {
    const int64_t batch = global_batch / R;
    // Sharding needs a gradient over more than one GPU (R c of them).
    std::vector<cost::DataParallelSharding> shardings;
    if (unsharded || R * cp == 1) shardings.push_back(cost::DataParallelSharding::kNone);
    if (R * cp > 1) shardings.insert(shardings.end(), sharded.begin(), sharded.end());
    std::vector<std::pair<std::string, std::vector<int>>> schedules;
    for (const std::string& name : ir::ScheduleNames()) schedules.emplace_back(name, ChunkChoices(c, name, K, o));
    for (int e : ExpertParallelDegrees(c, t, t * cp * R)) {
    // Many micro-batches first: small bubbles, good bounds early.
    for (int64_t M : Divisors(batch) | std::views::reverse) {
      for (const auto& [name, chunks] : schedules) {
        for (int v : chunks) {
          if (!ir::CheckShape(name, K, static_cast<int32_t>(M), v)) continue;  // the schedule's own rules
          // Interleaved with Megatron-Core's default group of K micro-batches
          // (ir::InterleavedGroup): other M need a flag a plan should not ask for.
          if (name == "interleaved" && M % K != 0) continue;
          for (auto mode : modes) {
            for (auto sharding : shardings) {
              for (const auto& algorithm : partitions) {
                Candidate cand;
                cand.tensor_parallel = t;
                cand.sequence_parallel = sp;
                cand.tp_comm_overlap = overlap;
                cand.context_parallel = cp;
                cand.expert_parallel = e;
                cand.stages = K;
                cand.replicas = R;
                cand.micro_batches = static_cast<int>(M);
                cand.schedule = name;
                cand.chunks = v;
                cand.recompute = mode;
                cand.sharding = sharding;
                cand.partition = algorithm;
                cand.batch = batch;
                grid.push_back(std::move(cand));
              }
            }
          }
        }
      }
    }
    }
  }
  }
  }
  }
  }
  return grid;
}

std::string WhyNoConfiguration(const cost::Config& c, int devices, int64_t global_batch, const SearchOptions& o) {
  const int L = static_cast<int>(c.model.layers.size());
  const std::vector<int> ts = TensorParallelDegrees(c, devices);
  std::vector<int> cs;
  int64_t most = 0;  // the most GPUs any allowed t and c can use: L stages of global_batch replicas
  bool split = false;  // some t x c x K x R equals the GPUs
  for (int t : ts) {
    for (int cp : ContextParallelDegrees(c, devices, t, o)) {
      if (std::find(cs.begin(), cs.end(), cp) == cs.end()) cs.push_back(cp);
      most = std::max(most, int64_t{t} * cp * L * global_batch);
      split = split || !PipelineSplits(devices / (t * cp), L, global_batch).empty();
    }
  }
  std::sort(cs.begin(), cs.end());
  const std::string rule = fmt::format(
      "a configuration splits the GPUs as t x c x K x R (tensor-parallel t in {{{}}}, context-parallel c in {{{}}}, "
      "K <= {} pipeline stages, one layer each at least, and R replicas dividing the global batch of {} samples)",
      fmt::join(ts, ", "), fmt::join(cs, ", "), L, global_batch);
  if (!split && devices > most) {
    return fmt::format("{}: no configuration of {} GPUs for this model: {}, which uses at most {} GPUs", c.source,
                       devices, rule, most);
  }
  if (!split) return fmt::format("{}: no configuration of {} GPUs for this model: {}; no such split makes {}",
                                 c.source, devices, rule, devices);
  return fmt::format("{}: no configuration of {} GPUs for this model: {}; every such split breaks a schedule's "
                     "rules on its stages and micro-batches or leaves the experts no layout",
                     c.source, devices, rule);
}

}  // namespace twinpipe::search
