// Issue 41, point 3: DualPipeV's paired F/B ops hide the expert all-to-alls
// of one behind the compute of the other. Held end to end on a Mixtral-
// class plan: the costs' all-to-all seconds against the same model with its
// all-to-all kernels taken out (an independent difference), the paired
// schedule against itself run in turn, and a dense model unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "cost_models/config.h"
#include "cost_models/plan_costs.h"
#include "partition/pipeline_plan.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

nlohmann::json MixtralClass(bool experts) {
  nlohmann::json model = {{"generator", "transformer"}, {"layers", 8}, {"d_model", 4096}, {"ffn", 14336},
                          {"heads", 32}, {"kv_heads", 8}, {"seq", 4096}, {"vocab", 32000}, {"dtype", "bf16"},
                          {"causal", true}, {"mlp", "swiglu"}, {"norm", "rmsnorm"}, {"position", "rope"},
                          {"bias", false}, {"attention", "fused"}};
  nlohmann::json pipeline = {{"stages", 2}, {"schedule", "dualpipev"}, {"chunks", 2}};
  if (experts) {
    model.update({{"experts", 8}, {"top_k", 2}, {"moe_ffn", 14336}, {"grouped_gemm", true}});
    pipeline["expert_parallel"] = 8;
  }
  return {{"model", model},
          {"training", {{"batch", 8}, {"microbatches", 8}, {"optimizer", "adam"}, {"bytes_per_param", 18}}},
          {"pipeline", pipeline},
          {"cluster", {{"device", "H100-SXM"}, {"devices", 16}, {"gpus_per_node", 8}, {"link", "nvlink4"},
                       {"inter_node_link", "ib-ndr"}}}};
}

cost::Config Load(const nlohmann::json& j) {
  auto c = cost::LoadConfig(j.dump(), "overlap.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

ir::Schedule Unpaired(ir::Schedule s) {
  for (auto& program : s.programs) {
    for (ir::Op& op : program) op.paired = false;
  }
  return s;
}

TEST(Overlap, PairedOpsHideTheAllToAllsOfAnMoePlan) {
  const cost::Config c = Load(MixtralClass(true));
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan) << plan.error().message;
  const PlanCosts costs = cost::CostsFromPlan(c, *plan);
  ASSERT_EQ(costs.all_to_all_s.size(), costs.compute_s.size());
  // The all-to-alls' seconds are what the ops lose when the kernels go.
  cost::Config without = c;
  for (auto& layer : without.model.layers) {
    std::vector<cost::Kernel> kept;
    for (const cost::Kernel& k : layer.kernels) {
      if (k.collective != cost::Kernel::Collective::kAllToAll) kept.push_back(k);
    }
    layer.kernels = cost::Kernels(std::move(kept));
  }
  const PlanCosts bare = cost::CostsFromPlan(without, *plan);
  EXPECT_TRUE(bare.all_to_all_s.empty());
  for (size_t st = 0; st < costs.compute_s.size(); ++st) {
    for (ir::OpKind kind : {ir::OpKind::kForward, ir::OpKind::kBackward, ir::OpKind::kBackwardInput}) {
      const int k = cost::ComputeSlot(kind);
      EXPECT_NEAR(costs.compute_s[st][k] - bare.compute_s[st][k], costs.all_to_all_s[st][k],
                  1e-9 * costs.compute_s[st][k])
          << "stage " << st << " slot " << k;
      EXPECT_GT(costs.all_to_all_s[st][k], 0) << "stage " << st << " slot " << k;
    }
    EXPECT_EQ(costs.all_to_all_s[st][cost::ComputeSlot(ir::OpKind::kBackwardWeight)], 0);
  }
  // Paired, the step is shorter than the same order run in turn, by at most
  // the all-to-alls the pairs hold, in both engines.
  int pairs = 0;
  double most_hidden = 0;
  for (const auto& program : plan->schedule.programs) {
    for (size_t i = 0; i < program.size(); ++i) {
      if (!program[i].paired) continue;
      ++pairs;
      size_t j = i + 1;
      while (ir::IsComm(program[j].kind)) ++j;
      most_hidden += costs.all_to_all_s[program[i].stage][0] +
                     costs.all_to_all_s[program[j].stage][cost::ComputeSlot(program[j].kind)];
    }
  }
  ASSERT_GT(pairs, 0);
  for (const bool in_order : {false, true}) {
    auto run = [&](const ir::Schedule& s) { return in_order ? SimulateInOrder(s, costs) : SimulateEventDriven(s, costs); };
    auto paired = run(plan->schedule);
    auto turns = run(Unpaired(plan->schedule));
    ASSERT_TRUE(paired && turns);
    EXPECT_LT(paired->step_time_s, turns->step_time_s * (1 - 1e-3)) << in_order;
    EXPECT_GE(paired->step_time_s, turns->step_time_s - most_hidden - 1e-12) << in_order;
    double busy_paired = 0, busy_turns = 0;
    for (size_t d = 0; d < paired->devices.size(); ++d) {
      busy_paired += paired->devices[d].busy_s;
      busy_turns += turns->devices[d].busy_s;
    }
    EXPECT_LT(busy_paired, busy_turns);
  }
}

TEST(Overlap, ADenseModelIsUnchangedByPairs) {
  const cost::Config c = Load(MixtralClass(false));
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan) << plan.error().message;
  const PlanCosts costs = cost::CostsFromPlan(c, *plan);
  EXPECT_TRUE(costs.all_to_all_s.empty());
  EXPECT_TRUE(cost::OverlappedDurations(plan->schedule, costs).empty());
  auto paired = Simulate(plan->schedule, costs);
  auto turns = Simulate(Unpaired(plan->schedule), costs);
  ASSERT_TRUE(paired && turns);
  EXPECT_EQ(paired->step_time_s, turns->step_time_s);
}

// Issue 36: Transformer Engine's userbuffers never make a step longer. On a
// fixed cut (Megatron's split), each op is as long or shorter with the
// collectives beside their GEMMs (Overlap.ACollectiveBesideItsGemmNeverMakes-
// AnOpLonger), and a schedule that keeps each device's issue order is no
// longer when no op is: so over schedules, precisions, tensor-parallel sizes,
// recompute and replicas the simulated step is never longer, on both engines,
// and shorter where a collective hides.
TEST(Overlap, UserbuffersNeverMakeAStepLongerOnAFixedCut) {
  int shorter = 0, checked = 0;
  for (const std::string schedule : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
    for (const std::string dtype : {"bf16", "fp8"}) {
      for (const int t : {2, 4}) {
        for (const std::string recompute : {"none", "selective", "full"}) {
          SCOPED_TRACE(schedule + " " + dtype + " t=" + std::to_string(t) + " recompute " + recompute);
          nlohmann::json j = {
              {"model",
               {{"generator", "transformer"}, {"layers", 4}, {"d_model", 4096}, {"ffn", 14336}, {"heads", 32},
                {"kv_heads", 8}, {"seq", 4096}, {"vocab", 32000}, {"dtype", dtype}, {"causal", true},
                {"mlp", "swiglu"}, {"norm", "rmsnorm"}, {"position", "rope"}, {"bias", false},
                {"attention", "fused"}}},
              {"training",
               {{"batch", 16}, {"microbatches", 8}, {"bytes_per_param", 18}, {"data_parallel_sharding", "optimizer"}}},
              {"pipeline",
               {{"stages", 2}, {"schedule", schedule}, {"recompute", recompute}, {"partition", "megatron"},
                {"tensor_parallel", t}, {"sequence_parallel", true}, {"recompute_timing", "in-backward"}}},
              {"cluster", {{"device", "H100-SXM"}, {"devices", 2 * t * 2}, {"gpus_per_node", 8}, {"link", "nvlink4"},
                           {"inter_node_link", "ib-ndr"}, {"placement", "tp-cp-dp-pp"}}}};
          if (recompute == "full") j["pipeline"]["recompute_granularity"] = "layer";
          const cost::Config serial = Load(j);
          j["pipeline"]["tp_comm_overlap"] = true;
          const cost::Config beside = Load(j);
          auto a = partition::PlanFromConfig(serial), b = partition::PlanFromConfig(beside);
          ASSERT_TRUE(a && b);
          for (size_t st = 0; st < a->partition.cells.size(); ++st) {
            ASSERT_EQ(a->partition.cells[st].first_layer, b->partition.cells[st].first_layer);
          }
          const PlanCosts ca = cost::CostsFromPlan(serial, *a), cb = cost::CostsFromPlan(beside, *b);
          auto sa = SimulateInOrder(a->schedule, ca), sb = SimulateInOrder(b->schedule, cb);
          auto ea = SimulateEventDriven(a->schedule, ca), eb = SimulateEventDriven(b->schedule, cb);
          ASSERT_TRUE(sa && sb && ea && eb);
          EXPECT_LE(sb->step_time_s, sa->step_time_s * (1 + 1e-12));
          EXPECT_LE(eb->step_time_s, ea->step_time_s * (1 + 1e-12));
          shorter += sb->step_time_s < sa->step_time_s * (1 - 1e-6);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 2 * 2 * 3);
  EXPECT_EQ(shorter, checked);
}

}  // namespace
}  // namespace twinpipe::simulate
