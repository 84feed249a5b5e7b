// Placement across nodes (Megatron's order: tensor-parallel groups inside a
// node, then stages, then replicas): transfers between nodes and all-reduces
// over replicas in other nodes run on the inter-node link.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "partition/pipeline_plan.h"
#include "partition/plan.h"
#include "cost_models/plan_costs.h"
#include "simulate/engine_parts.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

struct Placed {
  PlanCosts costs;
  cost::Plan plan;
  SimResult result;
};

Placed Simulate(int devices, int gpus_per_node, int t = 1, bool sp = false, const char* p2p = "overlapped") {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 4, "d_model": 1024, "heads": 16, "seq": 512, "vocab": 32000,
               "dtype": "bf16"}},
    "training": {{"batch": 8, "microbatches": 4}},
    "pipeline": {{"stages": 2, "schedule": "1f1b", "tensor_parallel": {}, "sequence_parallel": {}, "p2p": "{}"}},
    "cluster": {{"device": "A100-80GB", "devices": {}, "gpus_per_node": {}, "link": "nvlink3",
                 "inter_node_link": "ib-hdr"}}}})", t, sp, p2p, devices, gpus_per_node),
                            "nodes.json");
  EXPECT_TRUE(c) << c.error().message;
  auto plan = partition::PlanFromConfig(*c);
  EXPECT_TRUE(plan) << plan.error().message;
  PlanCosts costs = CostsFromPlan(*c, *plan);
  auto r = simulate::Simulate(plan->schedule, costs);
  EXPECT_TRUE(r) << r.error().message;
  return {costs, std::move(*plan), std::move(*r)};
}

// Each send's duration, against the link its two devices' nodes imply; with
// `gather_ranks` > 1, then a ring all-gather of the whole boundary over
// NVLink: NCCL's fixed cost, and gather_ranks - 1 steps, each moving one
// GPU's share.
void ExpectSendsOn(const Placed& run, const cost::Link& link, int gather_ranks = 1) {
  const cost::Link& nvlink = *cost::FindLink("nvlink3");
  int sends = 0;
  for (const auto& program : run.plan.schedule.programs) {
    for (const ir::Op& op : program) {
      if (!ir::IsSend(op.kind)) continue;
      const double ring_step = op.bytes / (nvlink.bandwidth * nvlink.collective_efficiency) + nvlink.latency_s;
      const double gather = gather_ranks == 1 ? 0 : nvlink.collective_latency_s + (gather_ranks - 1) * ring_step;
      EXPECT_NEAR(run.result.end_s[op.id] - run.result.start_s[op.id], cost::TransferTime(link, op.bytes) + gather,
                  1e-12)
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
  // Each GPU sends a quarter of the boundary; the receivers all-gather it
  // (Megatron's scatter-gather), unless sequence parallelism keeps it sharded.
  const Placed groups = Simulate(8, 4, 4);
  EXPECT_EQ(groups.costs.node, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(groups.costs.boundary_gather_ranks, 4);
  ExpectSendsOn(groups, *cost::FindLink("ib-hdr"), 4);
  const Placed sharded = Simulate(8, 4, 4, /*sp=*/true);
  EXPECT_EQ(sharded.costs.boundary_gather_ranks, 1);
  ExpectSendsOn(sharded, *cost::FindLink("ib-hdr"));
}

// Megatron-LM's transfers block compute (`"p2p": "blocking"`): a stage's
// forward of the next micro-batch starts only once the last one's send
// is done. 1F1B, 2 stages, 4 micro-batches: stage 0 runs its two warm-up
// forwards back to back while they are sent beside it, and with blocking
// transfers each forward is followed by its send, f + c.
TEST(Nodes, BlockingTransfersHoldTheComputeStream) {
  const Placed overlapped = Simulate(2, 1);
  const Placed blocking = Simulate(2, 1, 1, false, "blocking");
  EXPECT_FALSE(overlapped.costs.comm_on_compute_stream);
  EXPECT_TRUE(blocking.costs.comm_on_compute_stream);
  const double f = blocking.costs.compute_s[0][ComputeSlot(ir::OpKind::kForward)];
  const ir::Op* second = nullptr;
  double send_s = 0;
  for (const ir::Op& op : blocking.plan.schedule.programs[0]) {
    if (op.kind == ir::OpKind::kSendF && op.micro_batch == 0) {
      send_s = cost::TransferTime(*cost::FindLink("ib-hdr"), op.bytes);
    }
    if (op.kind == ir::OpKind::kForward && op.micro_batch == 1) second = &op;
  }
  ASSERT_NE(second, nullptr);
  ASSERT_GT(send_s, 0);
  EXPECT_NEAR(overlapped.result.start_s[second->id], f, 1e-12);
  EXPECT_NEAR(blocking.result.start_s[second->id], f + send_s, 1e-12);
  EXPECT_GT(blocking.result.step_time_s, overlapped.result.step_time_s);
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
        // A ring of 2: (n-1)/n of the bytes twice, 2 (n-1) latencies, and
        // NCCL's fixed cost once: NVLink's (InfiniBand has none of its own).
        const double expected = 2 * 0.5 * op.bytes / (link.bandwidth * link.collective_efficiency) +
                                2 * link.latency_s + cost::FindLink("nvlink3")->collective_latency_s;
        EXPECT_NEAR(run.result.end_s[op.id] - run.result.start_s[op.id], expected, 1e-12);
        ++all_reduces;
      }
    }
    EXPECT_EQ(all_reduces, 2);
  }
}

// The partitioner charges each cut what the simulator charges its two
// transfers (activation, gradient): the link the devices' nodes imply, and
// the receivers' all-gather of a tensor-parallel boundary.
TEST(Nodes, PartitionerChargesCutsAsTheSimulatorChargesTransfers) {
  struct Case {
    int devices, gpus_per_node, t;
    bool sp;
  };
  for (const Case& k : {Case{2, 2, 1, false}, Case{2, 1, 1, false}, Case{16, 8, 8, false}, Case{16, 8, 8, true},
                        Case{8, 4, 2, false}}) {
    SCOPED_TRACE(fmt::format("{} GPUs, {} per node, t={}{}", k.devices, k.gpus_per_node, k.t, k.sp ? " sp" : ""));
    const Placed run = Simulate(k.devices, k.gpus_per_node, k.t, k.sp);
    auto c = cost::LoadConfig(fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 4, "d_model": 1024, "heads": 16, "seq": 512, "vocab": 32000,
                 "dtype": "bf16"}},
      "training": {{"batch": 8, "microbatches": 4}},
      "pipeline": {{"stages": 2, "schedule": "1f1b", "tensor_parallel": {}, "sequence_parallel": {}}},
      "cluster": {{"device": "A100-80GB", "devices": {}, "gpus_per_node": {}, "link": "nvlink3",
                   "inter_node_link": "ib-hdr"}}}})", k.t, k.sp, k.devices, k.gpus_per_node), "nodes.json");
    ASSERT_TRUE(c) << c.error().message;
    const partition::PartitionProblem p = partition::BuildProblem(*c);
    const auto cut = cost::CutBytes(c->model);
    const double mb = static_cast<double>(c->training.MicroBatchSize());
    const auto& s = run.plan.schedule;
    for (int st = 0; st + 1 < s.num_stages; ++st) {
      for (int j = 0; j + 1 < p.num_layers; ++j) {
        EXPECT_NEAR(p.cut_costs[p.cut_class[st]][j],
                    2 * run.costs.TransferSeconds(s.placement[st], s.placement[st + 1], cut[j] * mb), 1e-15)
            << "stage " << st << " cut after layer " << j;
      }
    }
  }
  // Stages on one device (a V) pass their boundary in memory: no cut cost;
  // between devices in two nodes, the inter-node link.
  auto c = cost::LoadConfig(R"({
    "model": {"generator": "transformer", "layers": 8, "d_model": 1024, "heads": 16, "seq": 512, "vocab": 32000,
              "dtype": "bf16"},
    "training": {"batch": 8, "microbatches": 4},
    "pipeline": {"stages": 4, "schedule": "1f1b"},
    "cluster": {"device": "A100-80GB", "devices": 4, "gpus_per_node": 1, "link": "nvlink3", "inter_node_link": "ib-hdr"}
  })", "v.json");
  ASSERT_TRUE(c) << c.error().message;
  const std::vector<int> v = {0, 1, 1, 0};
  const partition::PartitionProblem p = partition::BuildProblem(*c, nullptr, &v);
  const double mb = static_cast<double>(c->training.MicroBatchSize());
  const double bytes = cost::CutBytes(c->model)[2] * mb;
  const cost::Link& ib = *cost::FindLink("ib-hdr");
  EXPECT_DOUBLE_EQ(p.cut_costs[p.cut_class[0]][2], 2 * cost::TransferTime(ib, bytes));
  EXPECT_EQ(p.cut_costs[p.cut_class[1]][2], 0);
  EXPECT_DOUBLE_EQ(p.cut_costs[p.cut_class[2]][2], 2 * cost::TransferTime(ib, bytes));
}

}  // namespace
}  // namespace twinpipe::simulate
