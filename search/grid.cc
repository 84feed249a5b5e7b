#include "search/grid.h"

#include <algorithm>
#include <ranges>
#include <string>

#include <fmt/format.h>

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
    if (in_a_node && t.heads % d == 0 && kv_heads % d == 0 && t.ffn % d == 0 && t.vocab % d == 0) {
      out.push_back(d);
    }
  }
  return out;
}

std::vector<Candidate> Grid(const cost::Config& c, int devices, int64_t global_batch) {
  const int L = static_cast<int>(c.model.layers.size());
  std::vector<cost::PartitionAlgorithm> partitions;
  for (const auto& [name, a] : cost::kPartitionAlgorithmNames) {
    if (a != cost::PartitionAlgorithm::kManual && a != cost::PartitionAlgorithm::kMegatron) partitions.push_back(a);
  }
  std::vector<ir::RecomputeMode> modes{ir::RecomputeMode::kNone, ir::RecomputeMode::kFull,
                                       ir::RecomputeMode::kExceptLast};
  if (c.transformer) modes.push_back(ir::RecomputeMode::kSelective);
  std::vector<Candidate> grid;
  for (int t : TensorParallelDegrees(c, devices)) {
  for (bool sp : t > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
  const int groups = devices / t;
  for (int K = 1; K <= groups; ++K) {
    const int R = groups / K;
    if (groups % K != 0 || K > L || global_batch % R != 0) continue;
    const int64_t batch = global_batch / R;
    // Many micro-batches first: small bubbles, good bounds early.
    for (int64_t M : Divisors(batch) | std::views::reverse) {
      for (const std::string& name : ir::ScheduleNames()) {
        for (int v : ir::ChunkChoices(name)) {
          if (v > 1 && (K == 1 || static_cast<int64_t>(K) * v > L)) continue;
          if (!ir::CheckShape(name, K, static_cast<int32_t>(M), v)) continue;  // the schedule's own rules
          for (auto mode : modes) {
            for (const auto& algorithm : partitions) {
              Candidate cand;
              cand.tensor_parallel = t;
              cand.sequence_parallel = sp;
              cand.stages = K;
              cand.replicas = R;
              cand.micro_batches = static_cast<int>(M);
              cand.schedule = name;
              cand.chunks = v;
              cand.recompute = mode;
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
  return grid;
}

}  // namespace twinpipe::search
