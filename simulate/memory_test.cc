// The one memory model, held three ways, on random models (heads that
// recompute does not re-run among them), cuts, micro-batch counts and
// recompute granularities (per cell; per layer, with layers whose input a
// tensor-parallel group holds whole, the kept inputs distributed or not):
//   - the peak the simulator reaches by charging each op's deltas
//     (cost::MemoryAtStart / MemoryAtEnd) on each device;
//   - what the partitioner plans with (cost::CellPeakMemory over
//     cost::StagePeaks, without its boundary buffers), for the schedules
//     with one stage per device (naive, GPipe, 1F1B, and the zero-bubble
//     H1 and H2 with their split backwards), on both engines;
//   - for GPipe and 1F1B, a closed form written here from the schedules'
//     orders alone.
// And a `memory` partition, planned to a cap, is simulated within it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost_models/config.h"
#include "cost_models/memory_model.h"
#include "cost_models/plan_costs.h"
#include "partition/pipeline_plan.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

// A random explicit model of `layers` layers on `stages` CPU devices, the
// schedule, recompute and granularity given, a random manual cut; heads
// (layers that recompute does not re-run) at random and, per layer, inputs
// held whole by 1, 2 or 4 GPUs and the kept inputs distributed or not.
cost::Config RandomConfig(std::mt19937& rng, int layers, int stages, int micro_batches, const std::string& schedule,
                          const std::string& recompute, const std::string& granularity = "cell") {
  std::uniform_int_distribution<int> bytes(1, 1 << 16);
  nlohmann::json model = {{"input_bytes", bytes(rng)}, {"layers", nlohmann::json::array()}};
  for (int i = 0; i < layers; ++i) {
    model["layers"].push_back({{"name", fmt::format("l{}", i)},
                               {"fwd_flops", 1e6 * (1 + rng() % 8)},
                               {"params", bytes(rng)},
                               {"out_bytes", bytes(rng)},
                               {"stash_bytes", bytes(rng) * (1 + static_cast<int>(rng() % 8))}});
  }
  // A random cut: stages - 1 distinct interior boundaries.
  std::vector<int> firsts{0};
  std::vector<int> interior;
  for (int i = 1; i < layers; ++i) interior.push_back(i);
  std::shuffle(interior.begin(), interior.end(), rng);
  interior.resize(stages - 1);
  std::sort(interior.begin(), interior.end());
  firsts.insert(firsts.end(), interior.begin(), interior.end());
  const nlohmann::json j = {
      {"model", model},
      {"training", {{"batch", micro_batches * (1 + static_cast<int>(rng() % 3))}, {"microbatches", micro_batches}}},
      {"pipeline",
       {{"stages", stages}, {"schedule", schedule}, {"recompute", recompute}, {"partition", "manual"},
        {"first_layers", firsts}, {"recompute_granularity", granularity}}},
      {"cluster", {{"device", "CPU"}, {"devices", stages}, {"link", "inproc"}}}};
  auto c = cost::LoadConfig(j.dump(), "random.json");
  EXPECT_TRUE(c) << c.error().message;
  for (auto& layer : c->model.layers) layer.rematerialized = rng() % 4 != 0;
  if (granularity == "layer") {
    for (auto& layer : c->model.layers) layer.input_replicas = 1 << (rng() % 3);
    c->pipeline.checkpointing.distribute_saved_activations = rng() % 2;
  }
  return *c;
}

// The activation peak of a stage holding n micro-batches at most (GPipe:
// n = M; 1F1B: min(K - s, M)), each holding `whole` bytes from its forward
// to its backward or, when recomputed, `rebuilt` while its forward runs and
// from its recompute to its backward and `kept` between them (per cell,
// `rebuilt` is the whole; per layer, the kept inputs and one layer's
// activations, never more than the whole). GPipe runs every forward, then
// the backwards last first; 1F1B's stage runs n forwards, then alternates,
// and its backwards go first first.
double ClosedFormPeak(const std::string& schedule, const std::string& recompute, int n, int micro_batches,
                      double whole, double kept, double rebuilt) {
  if (recompute == "none") return n * whole;
  // Full: every micro-batch keeps `kept` after its forward; a recompute
  // rebuilds one while the n - 1 others keep theirs; when the kept bytes
  // exceed the rebuilt (a large input), n kept at once is the peak.
  if (recompute == "full") return std::max(n * kept, (n - 1) * kept + rebuilt);
  // Except-last: the last micro-batch keeps its whole activation.
  if (micro_batches == 1) return whole;
  // GPipe: the last forward comes with the M - 1 others kept, and its
  // backward, the first, frees it before any recompute.
  if (schedule == "gpipe") return (n - 1) * kept + whole;
  // 1F1B: before the last forward, up to r = min(n, M - 1) recomputed ones
  // in flight, one of them rebuilt at a time; then the last forward beside
  // n - 1 kept, and the first of those rebuilt beside it.
  const int r = std::min(n, micro_batches - 1);
  double peak = std::max({r * kept, (r - 1) * kept + rebuilt, (n - 1) * kept + whole});
  if (n >= 2) peak = std::max(peak, (n - 2) * kept + whole + rebuilt);
  return peak;
}

TEST(MemoryModel, TheWalkEqualsBothEnginesAndTheClosedFormForGPipeAnd1F1B) {
  std::mt19937 rng(35);
  int checked = 0, rebuilt_less = 0;
  for (int trial = 0; trial < 800; ++trial) {
    const int stages = 1 + static_cast<int>(rng() % 4), layers = stages + static_cast<int>(rng() % 5);
    const int micro_batches = 1 + static_cast<int>(rng() % 7);
    const std::string schedule = std::vector<std::string>{"gpipe", "1f1b", "naive", "zb-h1", "zb-h2"}[rng() % 5];
    const std::string recompute = std::vector<std::string>{"none", "full", "except-last"}[rng() % 3];
    const std::string granularity = trial % 2 ? "layer" : "cell";
    SCOPED_TRACE(fmt::format("trial {}: K={} L={} M={} {} recompute {} per {}", trial, stages, layers, micro_batches,
                             schedule, recompute, granularity));
    const cost::Config c = RandomConfig(rng, layers, stages, micro_batches, schedule, recompute, granularity);
    auto plan = partition::PlanFromConfig(c);
    ASSERT_TRUE(plan) << plan.error().message;
    // Received boundaries are held from their transfer to their consumer,
    // which depends on timing: the closed form counts them apart
    // (boundary_bytes), so the transfers here carry none.
    for (auto& program : plan->schedule.programs) {
      for (ir::Op& op : program) {
        if (ir::IsSend(op.kind) || ir::IsRecv(op.kind)) op.bytes = 0;
      }
    }
    const PlanCosts costs = cost::CostsFromPlan(c, *plan);
    auto sim = SimulateInOrder(plan->schedule, costs);
    ASSERT_TRUE(sim) << sim.error().message;
    auto event_driven = SimulateEventDriven(plan->schedule, costs);
    ASSERT_TRUE(event_driven) << event_driven.error().message;
    const auto in_flight = cost::InFlightPerStage(plan->schedule);
    const auto peaks = cost::StagePeaks(plan->schedule, c.pipeline.recompute);
    const auto cut = cost::CutBytes(c.model);
    for (int st = 0; st < stages; ++st) {
      const auto& cell = plan->partition.cells[st];
      const cost::MemoryInputs in{c.training.bytes_per_param, static_cast<double>(c.training.MicroBatchSize()),
                                  &peaks[st]};
      const cost::CellMemory closed =
          cost::CellPeakMemory(c.model, cut, cell.first_layer, cell.last_layer, c.pipeline.checkpointing, in);
      const double simulated = sim->devices[plan->schedule.placement[st]].peak_memory_bytes;
      const std::string where = fmt::format("stage {} (layers {}..{}, {} in flight)", st, cell.first_layer,
                                            cell.last_layer, in_flight[st]);
      EXPECT_NEAR(simulated, closed.total_bytes - closed.boundary_bytes, 1e-9 * simulated) << where;
      EXPECT_NEAR(event_driven->devices[plan->schedule.placement[st]].peak_memory_bytes, simulated, 1e-9 * simulated)
          << where << " (event-driven engine)";
      ++checked;
      // Per layer, a recompute holds less than the whole cell at once.
      if (recompute != "none" && costs.RebuiltBytes(st) < costs.activation_bytes[st] * (1 - 1e-9)) ++rebuilt_less;
      if (schedule != "gpipe" && schedule != "1f1b") continue;
      const double formula =
          closed.params_bytes + ClosedFormPeak(schedule, recompute, in_flight[st], micro_batches,
                                               costs.activation_bytes[st], costs.input_bytes[st],
                                               costs.RebuiltBytes(st));
      EXPECT_NEAR(simulated, formula, 1e-9 * simulated) << where;
    }
  }
  EXPECT_GT(checked, 1600);
  EXPECT_GT(rebuilt_less, 100);
}

// The `memory` partition plans every cell within the devices' memory by the
// closed form; the simulator, charging op by op, finds each device within it.
TEST(MemoryModel, AMemoryPartitionIsSimulatedWithinItsCap) {
  std::mt19937 rng(36);
  int planned = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int stages = 2 + static_cast<int>(rng() % 3), layers = stages + 2 + static_cast<int>(rng() % 6);
    const int micro_batches = 2 + static_cast<int>(rng() % 6);
    const std::string schedule = rng() % 2 ? "gpipe" : "1f1b";
    const std::string recompute = std::vector<std::string>{"none", "full", "except-last"}[rng() % 3];
    const std::string granularity = trial % 2 ? "layer" : "cell";
    SCOPED_TRACE(fmt::format("trial {}: K={} L={} M={} {} recompute {} per {}", trial, stages, layers, micro_batches,
                             schedule, recompute, granularity));
    cost::Config c = RandomConfig(rng, layers, stages, micro_batches, schedule, recompute, granularity);
    c.pipeline.partition = cost::PartitionAlgorithm::kMemory;
    // A cap between the fullest cell of an even cut and twice that: some
    // trials cannot fit (a runtime failure), the others must.
    const auto cut = cost::CutBytes(c.model);
    const auto peaks = cost::StagePeaks(schedule, stages, micro_batches, 0, c.pipeline.recompute);
    double even = 0;
    for (int st = 0; st < stages; ++st) {
      const int first = st * layers / stages, last = (st + 1) * layers / stages - 1;
      const cost::MemoryInputs in{c.training.bytes_per_param, static_cast<double>(c.training.MicroBatchSize()),
                                  &peaks[st]};
      even = std::max(even, cost::CellPeakMemory(c.model, cut, first, last, c.pipeline.checkpointing, in).total_bytes);
    }
    const double cap = even * (0.7 + 0.6 * (rng() % 100) / 100.0);
    for (auto& d : c.cluster.devices) d.memory_bytes = cap;
    auto plan = partition::PlanFromConfig(c);
    if (!plan) {
      EXPECT_EQ(plan.error().kind, ErrorKind::kRuntime) << plan.error().message;
      continue;
    }
    ++planned;
    auto sim = Simulate(plan->schedule, cost::CostsFromPlan(c, *plan));
    ASSERT_TRUE(sim) << sim.error().message;
    for (size_t d = 0; d < sim->devices.size(); ++d) {
      EXPECT_LE(sim->devices[d].peak_memory_bytes, cap) << "device " << d;
      EXPECT_LE(sim->devices[d].peak_memory_bytes, plan->partition.cells[d].peak_memory_bytes) << "device " << d;
    }
  }
  EXPECT_GT(planned, 100);
}

// The `auto` schedule plans with the memory the engines charge, per cell
// and per layer: planned to a cap below what it holds uncapped, it either
// says it cannot fit (a runtime failure) or is simulated within the cap,
// received buffers included.
TEST(MemoryModel, AnAutoScheduleIsSimulatedWithinItsCap) {
  std::mt19937 rng(37);
  int planned = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int stages = 2 + static_cast<int>(rng() % 3), layers = stages + 2 + static_cast<int>(rng() % 6);
    const int micro_batches = 2 + static_cast<int>(rng() % 8);
    const std::string recompute = trial % 4 == 0 ? "none" : "full";
    const std::string granularity = trial % 2 ? "layer" : "cell";
    SCOPED_TRACE(fmt::format("trial {}: K={} L={} M={} recompute {} per {}", trial, stages, layers, micro_batches,
                             recompute, granularity));
    cost::Config c = RandomConfig(rng, layers, stages, micro_batches, "auto", recompute, granularity);
    auto uncapped = partition::PlanFromConfig(c);
    ASSERT_TRUE(uncapped) << uncapped.error().message;
    auto free = Simulate(uncapped->schedule, cost::CostsFromPlan(c, *uncapped));
    ASSERT_TRUE(free) << free.error().message;
    double most = 0;
    for (const auto& d : free->devices) most = std::max(most, d.peak_memory_bytes);
    const double cap = most * (0.7 + 0.3 * (rng() % 100) / 100.0);
    c.pipeline.memory_cap = cap;
    auto plan = partition::PlanFromConfig(c);
    if (!plan) {
      EXPECT_EQ(plan.error().kind, ErrorKind::kRuntime) << plan.error().message;
      continue;
    }
    ++planned;
    auto sim = Simulate(plan->schedule, cost::CostsFromPlan(c, *plan));
    ASSERT_TRUE(sim) << sim.error().message;
    for (size_t d = 0; d < sim->devices.size(); ++d) {
      EXPECT_LE(sim->devices[d].peak_memory_bytes, cap * (1 + 1e-12)) << "device " << d;
    }
  }
  EXPECT_GT(planned, 50);
}

// Megatron-Core's distributed optimizer shards each weight's optimizer state
// over the GPUs that hold that weight: the experts' over the expert
// data-parallel group (replicas x c / e GPUs), the other weights' over
// replicas x c. Per GPU, with P the other weights and X the experts held
// (E / e of them): static bytes = P (b - s (1 - 1/R)) + X (b - s (1 - e/R)),
// b bytes per parameter, s the optimizer state's share of them (12 for Adam
// with fp32 master weights).
TEST(MemoryModel, ExpertsOptimizerStateShardsOverTheExpertDataParallelGroup) {
  for (const int ep : {1, 2, 4}) {
    SCOPED_TRACE(fmt::format("expert_parallel {}", ep));
    auto c = cost::LoadConfig(fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 2, "d_model": 256, "ffn": 1024, "heads": 4, "seq": 64,
                 "vocab": 512, "dtype": "bf16", "mlp": "swiglu", "bias": false, "experts": 8, "top_k": 2}},
      "training": {{"batch": 16, "microbatches": 4, "optimizer": "adam", "bytes_per_param": 18,
                    "data_parallel_sharding": "optimizer"}},
      "pipeline": {{"stages": 1, "schedule": "1f1b", "recompute": "none", "expert_parallel": {}}},
      "cluster": {{"device": "H100-SXM", "devices": 4, "link": "nvlink4"}}
    }})", ep), "moe.json");
    ASSERT_TRUE(c) << c.error().message;
    auto plan = partition::PlanFromConfig(*c);
    ASSERT_TRUE(plan) << plan.error().message;
    const cost::PlanCosts costs = cost::CostsFromPlan(*c, *plan);
    double params = 0, experts = 0;
    for (const cost::Layer& l : c->model.layers) {
      params += l.params;
      experts += l.expert_params;
    }
    const double d = 256, fe = 1024, R = 4;
    EXPECT_DOUBLE_EQ(experts, 2 * (8.0 / ep) * 3 * d * fe);  // 2 blocks of E / e SwiGLU experts
    const double b = 18, state = 12;
    EXPECT_NEAR(costs.static_bytes[0],
                (params - experts) * (b - state * (1 - 1 / R)) + experts * (b - state * (1 - ep / R)), 1e-6 * params);
  }
}

// With replicas, the static bytes of every data-parallel sharding, of FP8's
// weight copies and of an MoE block's experts (their own data-parallel
// group): the `memory` partition plans each cell with what CostsFromPlan
// charges its device (cost::StaticBytesOf), so its closed form still equals
// the simulated peak, and sharding lowers it by ZeRO's share.
TEST(MemoryModel, TheMemoryPartitionPlansTheStaticBytesTheSimulatorCharges) {
  int checked = 0;
  for (const std::string sharding : {"none", "optimizer", "full"}) {
    for (const std::string dtype : {"bf16", "fp8"}) {
      for (const bool fp8_params : {false, true}) {
        for (const int experts : {1, 4}) {
          if (dtype == "bf16" && fp8_params) continue;
          const bool tied = experts == 1 && sharding != "optimizer";
          SCOPED_TRACE(fmt::format("{} sharding, {}{}, {} experts{}", sharding, dtype,
                                   fp8_params ? " (fp8_params)" : "", experts, tied ? ", tied embeddings" : ""));
          const int stages = 2, replicas = 4;
          nlohmann::json model = {{"generator", "transformer"}, {"layers", 6},      {"d_model", 1024},
                                  {"ffn", 2816},                {"heads", 16},      {"kv_heads", 4},
                                  {"seq", 512},                 {"vocab", 32000},   {"dtype", dtype},
                                  {"mlp", "swiglu"},            {"norm", "rmsnorm"}, {"position", "rope"},
                                  {"attention", "fused"},       {"bias", false},
                                  {"tied_embeddings", tied}};
          if (experts > 1) {
            model["experts"] = experts;
            model["top_k"] = 2;
          }
          const nlohmann::json j = {
              {"model", model},
              {"training",
               {{"batch", 8 * replicas}, {"microbatches", 8}, {"bytes_per_param", 18},
                {"data_parallel_sharding", sharding}, {"fp8_params", fp8_params}}},
              {"pipeline", {{"stages", stages}, {"schedule", "1f1b"}, {"recompute", "none"}, {"partition", "memory"}}},
              {"cluster", {{"device", "H100-SXM"}, {"devices", stages * replicas}, {"gpus_per_node", 8}}}};
          auto c = cost::LoadConfig(j.dump(), "sharded.json");
          ASSERT_TRUE(c) << c.error().message;
          auto plan = partition::PlanFromConfig(*c);
          ASSERT_TRUE(plan) << plan.error().message;
          for (auto& program : plan->schedule.programs) {
            for (ir::Op& op : program) {
              if (ir::IsSend(op.kind) || ir::IsRecv(op.kind)) op.bytes = 0;
            }
          }
          const PlanCosts costs = cost::CostsFromPlan(*c, *plan);
          auto sim = SimulateInOrder(plan->schedule, costs);
          ASSERT_TRUE(sim) << sim.error().message;
          const auto peaks = cost::StagePeaks(plan->schedule, c->pipeline.recompute);
          const auto cut = cost::CutBytes(c->model);
          const cost::StaticBytesRule rule = cost::StaticBytesOf(*c, c->GradientRanks());
          for (int st = 0; st < stages; ++st) {
            const auto& cell = plan->partition.cells[st];
            const int device = plan->schedule.placement[st];
            const cost::MemoryInputs in{c->training.bytes_per_param,
                                        static_cast<double>(c->training.MicroBatchSize()), &peaks[st], &rule};
            const cost::CellMemory closed =
                cost::CellPeakMemory(c->model, cut, cell.first_layer, cell.last_layer, c->pipeline.checkpointing, in);
            const cost::CellMemoryTable table(c->model, cut, c->pipeline.checkpointing);
            EXPECT_NEAR(table.Peak(cell.first_layer, cell.last_layer, in).params_bytes, closed.params_bytes,
                        1e-9 * closed.params_bytes);
            EXPECT_NEAR(closed.params_bytes, costs.static_bytes[device], 1e-9 * closed.params_bytes) << "stage " << st;
            const double simulated = sim->devices[device].peak_memory_bytes;
            EXPECT_NEAR(simulated, closed.total_bytes - closed.boundary_bytes, 1e-9 * simulated) << "stage " << st;
            EXPECT_NEAR(cell.peak_memory_bytes, closed.total_bytes, 1e-9 * simulated) << "stage " << st;
            // ZeRO's shares of the 18 bytes a parameter (2 weights, 4
            // gradients, 12 of Adam's state) over the 4 replicas (the
            // experts' group too: one expert-parallel rank), FP8's two
            // 1-byte copies unless the weights are FP8, and fully sharded,
            // the gathered weights and gradients of two layers.
            const cost::CellParams p = cost::CellParamsOf(c->model, cell.first_layer, cell.last_layer);
            const double n = replicas, copies = dtype == "fp8" && !fp8_params ? 2 * p.fp8_params : 0;
            const double e = cost::DtypeBytes(c->model.dtype);
            const double want = sharding == "none"        ? 18 * p.params + copies
                                : sharding == "optimizer" ? (6 + 12 / n) * p.params + copies
                                                          : (18 * p.params + copies) / n + 2 * 2 * e * p.largest_layer;
            EXPECT_NEAR(closed.params_bytes, want, 1e-9 * want) << "stage " << st;
            EXPECT_EQ(p.expert_params > 0, experts > 1);
            // Tied, the last stage keeps a copy of the token embedding's table.
            if (tied && st == stages - 1) {
              EXPECT_GE(p.params, 32000.0 * 1024);
            }
            EXPECT_EQ(p.fp8_params > 0, dtype == "fp8");
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 3 * 3 * 2);
}

// Tied embeddings (the logits read the token embedding's table): on one
// device the table is held once; on two, Megatron keeps a copy on the last
// stage, so each device holds what it holds untied, and the two copies'
// gradients are all-reduced between the first and last stage before the
// optimizer steps, which lengthens the step by that all-reduce.
TEST(MemoryModel, TiedEmbeddingsKeepACopyOnTheLastStageAndReduceItsGradient) {
  auto load = [](int stages, bool tied) {
    auto c = cost::LoadConfig(fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 4, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 256,
                 "vocab": 50000, "dtype": "bf16", "bias": false, "tied_embeddings": {}}},
      "training": {{"batch": 8, "microbatches": 4, "bytes_per_param": 18}},
      "pipeline": {{"stages": {}, "schedule": "1f1b", "recompute": "none"}},
      "cluster": {{"device": "H100-SXM", "devices": {}, "gpus_per_node": 1, "inter_node_link": "ib-ndr"}}
    }})", tied, stages, stages), "tied.json");
    EXPECT_TRUE(c) << c.error().message;
    return *c;
  };
  const double table = 512.0 * 50000, grad_bytes = 4;  // fp32 kept gradients in bf16 training
  for (const int stages : {1, 2}) {
    SCOPED_TRACE(fmt::format("{} stages", stages));
    const cost::Config untied = load(stages, false), tied = load(stages, true);
    auto untied_plan = partition::PlanFromConfig(untied), tied_plan = partition::PlanFromConfig(tied);
    ASSERT_TRUE(untied_plan && tied_plan);
    ASSERT_EQ(untied_plan->partition.cells.size(), tied_plan->partition.cells.size());
    for (size_t st = 0; st < tied_plan->partition.cells.size(); ++st) {
      EXPECT_EQ(untied_plan->partition.cells[st].first_layer, tied_plan->partition.cells[st].first_layer);
    }
    const PlanCosts a = cost::CostsFromPlan(untied, *untied_plan), b = cost::CostsFromPlan(tied, *tied_plan);
    auto sa = Simulate(untied_plan->schedule, a), sb = Simulate(tied_plan->schedule, b);
    ASSERT_TRUE(sa && sb);
    if (stages == 1) {
      EXPECT_NEAR(a.static_bytes[0] - b.static_bytes[0], table * 18, 1e-9 * a.static_bytes[0]);
      // The optimizer steps one table fewer.
      const cost::Device& h100 = untied.cluster.devices[0];
      const double stepped = cost::OptimizerStepTime("adam", cost::Dtype::kBf16, table, h100) -
                             cost::OptimizerStepTime("adam", cost::Dtype::kBf16, 0, h100);
      EXPECT_NEAR(a.step_s[0] - b.step_s[0], stepped, 1e-12);
      EXPECT_NEAR(sa->step_time_s - sb->step_time_s, stepped, 1e-12);
      continue;
    }
    // Two nodes of one GPU: a two-rank all-reduce over InfiniBand NDR.
    const cost::Link& ib = *cost::FindLink("ib-ndr");
    const double reduce = cost::CollectiveTime(cost::Kernel::Collective::kAllReduce, table * grad_bytes,
                                               {.ranks = 2, .nodes = 2, .intra = &ib, .inter = &ib, .rails = false});
    EXPECT_GT(reduce, 1e-4);
    for (int d = 0; d < 2; ++d) {
      EXPECT_NEAR(b.static_bytes[d], a.static_bytes[d], 1e-9 * a.static_bytes[d]) << "device " << d;
      EXPECT_NEAR(b.step_s[d] - a.step_s[d], reduce, 1e-12) << "device " << d;
      // The partitioner plans the copy too.
      EXPECT_NEAR(tied_plan->partition.cells[d].peak_memory_bytes, untied_plan->partition.cells[d].peak_memory_bytes,
                  1e-9 * a.static_bytes[d])
          << "device " << d;
    }
    EXPECT_GT(sb->step_time_s, sa->step_time_s + 0.5 * reduce);
    EXPECT_LE(sb->step_time_s, sa->step_time_s + reduce + 1e-9);
  }
}

}  // namespace
}  // namespace twinpipe::simulate
