// How a model is cut into cells (`pipeline.partition` of a config,
// `twinpipe partition --algo`), named once: the config loader and the
// command line parse the names into the enum, the partitioner switches on it
// (partition::CutLayers), and messages and --help list the table's names.
//
//   std::optional<PartitionAlgorithm> a = PartitionAlgorithmFromName("minmax");
//   PartitionAlgorithmName(PartitionAlgorithm::kMemory);  // "memory"
#pragma once

#include <optional>
#include <string_view>

#include "ir/name_table.h"

namespace twinpipe::cost {

// gpipe: the least variance of the cells' costs (GPipe's heuristic, exact);
// minmax: the least cost of the slowest cell; memory: minmax with every
// cell within its device's memory; manual: the config's first_layers;
// megatron: Megatron-Core's split of a transformer (an equal share of blocks
// per cell, the embedding on the first, the head on the last; see
// partition::MegatronFirstLayers).
enum class PartitionAlgorithm { kGpipe, kMinMax, kMemory, kManual, kMegatron };

// In the order the README's table and --help list them.
inline constexpr ir::NameTable<PartitionAlgorithm, 5> kPartitionAlgorithmNames{{
    {"gpipe", PartitionAlgorithm::kGpipe},
    {"minmax", PartitionAlgorithm::kMinMax},
    {"memory", PartitionAlgorithm::kMemory},
    {"manual", PartitionAlgorithm::kManual},
    {"megatron", PartitionAlgorithm::kMegatron},
}};

constexpr std::string_view PartitionAlgorithmName(PartitionAlgorithm a) {
  return ir::NameOf(kPartitionAlgorithmNames, a);
}
constexpr std::optional<PartitionAlgorithm> PartitionAlgorithmFromName(std::string_view name) {
  return ir::FromName(kPartitionAlgorithmNames, name);
}

}  // namespace twinpipe::cost
