// From a config to a partition report: builds the partitioning problem from
// the cost models (layer times per device kind as the simulator charges them,
// with a calibration where one is given; transfer time per cut; memory per
// cell for the configured schedule), runs the chosen algorithm and describes
// each cell.
//
//   Result<PartitionReport> r = PlanPartition(config, cost::PartitionAlgorithm::kMinMax);
//   r->cells[0].last_layer; r->bottleneck_s;
#pragma once

#include <string>
#include <vector>

#include "cost_models/calibration.h"
#include "cost_models/config.h"
#include "cost_models/memory_model.h"
#include "cost_models/plan.h"
#include "ir/result.h"
#include "partition/partitioner.h"

namespace twinpipe::partition {

// The report types live with the plan that simulate and execute take.
using cost::CellReport;
using cost::PartitionReport;

// The partitioning problem of a config (one cell per stage of the first
// pipeline replica).
// `peaks` (per stage, cost::StagePeaks of a schedule already built) spares
// building the configured schedule again to walk it. `placement` (per stage, its
// pipeline device; default stage k on device k) decides which link each
// cut's transfer takes: none between stages on one device, the inter-node
// link between devices on two nodes (Config::NodeOf). `calibration` (may
// be null) times the layers and cuts as cost::CostsFromPlan does with it.
PartitionProblem BuildProblem(const cost::Config& config, const std::vector<cost::StagePeak>* peaks = nullptr,
                              const std::vector<int>* placement = nullptr,
                              const cost::Calibration* calibration = nullptr);

// Runs gpipe | minmax | memory | manual. Bad manual indices are bad input
// (exit 2); a model that does not fit in memory is a runtime failure (exit 1).
// Megatron-Core's layout of a generated transformer over `cells` cells: the
// blocks (plus one unit each for the embedding and the loss where
// pipeline.account_for_embedding / account_for_loss count them) in equal
// shares, the first (units mod cells) cells one more; the embedding on the
// first cell, the head (final norm, logits, loss) on the last. The first
// layer of each cell.
Result<std::vector<int>> MegatronFirstLayers(const cost::Config& config, int cells);

Result<PartitionReport> PlanPartition(const cost::Config& config, cost::PartitionAlgorithm algorithm,
                                      const std::vector<cost::StagePeak>* peaks = nullptr,
                                      const std::vector<int>* placement = nullptr,
                                      const cost::Calibration* calibration = nullptr);

// PlanPartition's cut alone: the first layer of each cell. `explain`: as
// PartitionProblem's (false: no search for why nothing fits).
Result<std::vector<int>> CutLayers(const cost::Config& config, cost::PartitionAlgorithm algorithm,
                                   const std::vector<cost::StagePeak>* peaks = nullptr,
                                   const std::vector<int>* placement = nullptr,
                                   const cost::Calibration* calibration = nullptr, bool explain = true);

// Describes the cells of a given partition: each cell's time_s is the
// F + B (+ R) the simulator charges it (with the calibration's per-op
// overheads) and its outgoing transfers.
PartitionReport DescribePartition(const cost::Config& config, const std::vector<int>& first_layers,
                                  const std::vector<cost::StagePeak>* peaks = nullptr,
                                  const std::vector<int>* placement = nullptr,
                                  const cost::Calibration* calibration = nullptr);

}  // namespace twinpipe::partition
