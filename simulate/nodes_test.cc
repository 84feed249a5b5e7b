// Placement across nodes (Megatron's order: tensor-parallel groups inside a
// node, then stages, then replicas): transfers between nodes and all-reduces
// over replicas in other nodes run on the inter-node link.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "partition/pipeline_plan.h"
#include "simulate/costs.h"
#include "simulate/dependencies.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

struct Placed {
  SimCosts costs;
  partition::Plan plan;
  SimResult result;
};

Placed Simulate(int devices, int gpus_per_node, int t = 1) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 4, "d_model": 1024, "heads": 16, "seq": 512, "vocab": 32000,
               "dtype": "bf16"}},
    "training": {{"batch": 8, "microbatches": 4}},
    "pipeline": {{"stages": 2, "schedule": "1f1b", "tensor_parallel": {}}},
    "cluster": {{"device": "A100-80GB", "devices": {}, "gpus_per_node": {}, "link": "nvlink3",
                 "inter_node_link": "ib-hdr"}}}})", t, devices, gpus_per_node),
                            "nodes.json");
  EXPECT_TRUE(c) << c.error().message;
  auto plan = partition::PlanFromConfig(*c);
  EXPECT_TRUE(plan) << plan.error().message;
  SimCosts costs = CostsFromPlan(*c, *plan);
  auto r = simulate::Simulate(plan->schedule, costs);
  EXPECT_TRUE(r) << r.error().message;
  return {costs, std::move(*plan), std::move(*r)};
}

// Each send's duration, against the link its two devices' nodes imply.
void ExpectSendsOn(const Placed& run, const cost::Link& link) {
  int sends = 0;
  for (const auto& program : run.plan.schedule.programs) {
    for (const ir::Op& op : program) {
      if (!ir::IsSend(op.kind)) continue;
      EXPECT_NEAR(run.result.end_s[op.id] - run.result.start_s[op.id], cost::TransferTime(link, op.bytes), 1e-12)
          << ir::OpToken(op);
      ++sends;
    }
  }
  EXPECT_GT(sends, 0);
}

TEST(Nodes, TransfersBetweenNodesUseTheInterNodeLink) {
  const Placed one_node = Simulate(2, 8);
  EXPECT_TRUE(one_node.costs.node.empty());
  ExpectSendsOn(one_node, *cost::FindLink("nvlink3"));
  const Placed two_nodes = Simulate(2, 1);  // a node per device
  ASSERT_EQ(two_nodes.costs.node, (std::vector<int32_t>{0, 1}));
  ExpectSendsOn(two_nodes, *cost::FindLink("ib-hdr"));
  EXPECT_GT(two_nodes.result.step_time_s, one_node.result.step_time_s);
  // Tensor-parallel groups of 4 in nodes of 4: again one node per device.
  const Placed groups = Simulate(8, 4, 4);
  EXPECT_EQ(groups.costs.node, (std::vector<int32_t>{0, 1}));
  ExpectSendsOn(groups, *cost::FindLink("ib-hdr"));
}

// 2 stages x 2 replicas: in nodes of 4 the replicas share a node (NVLink);
// in nodes of 2 each replica has its own and the gradients cross InfiniBand.
TEST(Nodes, AllReducesOverReplicasInOtherNodesUseTheInterNodeLink) {
  for (int per_node : {4, 2}) {
    const Placed run = Simulate(4, per_node);
    const bool crosses = per_node == 2;
    EXPECT_EQ(run.costs.replica_nodes, crosses ? 2 : 1);
    const cost::Link& link = *cost::FindLink(crosses ? "ib-hdr" : "nvlink3");
    int all_reduces = 0;
    for (const auto& program : run.plan.schedule.programs) {
      for (const ir::Op& op : program) {
        if (op.kind != ir::OpKind::kAllReduce) continue;
        // A ring of 2: (n-1)/n of the bytes twice, 2 (n-1) latencies.
        const double expected = 2 * 0.5 * op.bytes / (link.bandwidth * link.collective_efficiency) + 2 * link.latency_s;
        EXPECT_NEAR(run.result.end_s[op.id] - run.result.start_s[op.id], expected, 1e-12);
        ++all_reduces;
      }
    }
    EXPECT_EQ(all_reduces, 2);
  }
}

}  // namespace
}  // namespace twinpipe::simulate
