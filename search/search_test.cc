#include "search/search.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "ir/builders.h"
#include "partition/pipeline_plan.h"
#include "cost_models/plan_costs.h"
#include "search/evaluation.h"
#include "search/grid.h"
#include "simulate/engine.h"

namespace twinpipe::search {
namespace {

const char* kConfig = R"({
  "model": {"generator": "transformer", "layers": 6, "d_model": 256, "heads": 4, "seq": 128, "vocab": 1000},
  "training": {"batch": 8, "microbatches": 4},
  "pipeline": {"stages": 4, "schedule": "1f1b"},
  "cluster": {"device": "A100-40GB", "devices": 4, "link": "pcie4"}
})";

cost::Config Load(const std::string& text) {
  auto c = cost::LoadConfig(text, "s.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// t must leave each GPU whole K/V heads: with 2 of 8 heads, no t beyond 2.
TEST(Grid, TensorParallelDegreesDivideTheKvHeads) {
  std::string text = R"({
    "model": {"generator": "transformer", "layers": 6, "d_model": 256, "heads": 8, "kv_heads": 2, "seq": 128, "vocab": 1024},
    "training": {"batch": 8, "microbatches": 4},
    "pipeline": {"stages": 1, "schedule": "1f1b"},
    "cluster": {"device": "A100-40GB", "devices": 8, "gpus_per_node": 8, "link": "nvlink3"}
  })";
  EXPECT_EQ(TensorParallelDegrees(Load(text), 8), (std::vector<int>{1, 2}));
  text.replace(text.find("\"kv_heads\": 2"), 13, "\"kv_heads\": 8");
  EXPECT_EQ(TensorParallelDegrees(Load(text), 8), (std::vector<int>{1, 2, 4, 8}));
}

struct Point {
  nlohmann::ordered_json config;
  double throughput = 0, peak = 0;
};

// The oracle: every grid point written out as a config, loaded, planned and
// simulated on its own, the way a user would run it. For a transformer the
// grid spans tensor parallelism t (dividing the GPUs of a node, the heads,
// the K/V heads, the FFN width and the vocabulary), with and without
// sequence parallelism (and, with it, with and without its overlap),
// context parallelism c (fused attention: c splitting the sequence in 2c
// chunks when causal), and selective recompute; with more than one gradient
// rank (R c > 1), the three shardings; the interleaved schedule takes 2, 4
// and 8 chunks and every v dividing the blocks per device. `knobs` narrows
// them as the search's options do.
std::vector<Point> SimulateEveryPoint(const std::string& text, double cap,
                                      const simulate::Calibration* calibration = nullptr,
                                      const SearchOptions& knobs = {}) {
  const auto original = nlohmann::ordered_json::parse(text);
  const cost::Config base = Load(text);
  const int GPUs = base.cluster.NumDevices(), L = static_cast<int>(base.model.layers.size());
  const int blocks = base.transformer ? base.transformer->layers : L;
  const int64_t global = base.training.batch * base.Replicas();
  const auto* tf = base.transformer ? &*base.transformer : nullptr;
  auto tried = [](const auto& list, auto value) { return std::find(list.begin(), list.end(), value) != list.end(); };
  std::vector<Point> points;
  std::vector<const char*> modes{"none", "full", "except-last"};
  if (base.transformer) modes.push_back("selective");
  for (int t = 1; t <= GPUs; ++t) {
    if (t > 1 && (!tf || GPUs % t || base.cluster.gpus_per_node % t || tf->heads % t || tf->kv_heads % t ||
                  tf->ffn % t || tf->vocab % t || (tf->experts > 0 && tf->moe_ffn % t))) {
      continue;
    }
  for (bool sp : {false, true}) {
    if (sp && t == 1) continue;
    if (!sp && t > 1 && tf && tf->experts > 1) continue;  // Megatron-Core's MoE needs sequence parallelism beside t
  for (bool overlap : {false, true}) {
    if (overlap && (!sp || !tried(knobs.tp_comm_overlap, true))) continue;
    if (!overlap && sp && !tried(knobs.tp_comm_overlap, false)) continue;
  for (int cp = 1; cp <= GPUs / t; ++cp) {
    if ((GPUs / t) % cp) continue;
    if (cp > 1 && (!tf || tf->attention != cost::AttentionKind::kFused || tf->seq % ((tf->causal ? 2 : 1) * cp) ||
                   (knobs.max_context_parallel > 0 && cp > knobs.max_context_parallel) ||
                   (knobs.min_context_tokens > 0 && tf->seq < knobs.min_context_tokens * cp))) {
      continue;
    }
  const int D = GPUs / (t * cp);
  for (int K = 1; K <= D; ++K) {
    if (D % K || K > L || global % (D / K)) continue;
    const int R = D / K;
    const int64_t batch = global / R;
    // A mixture of experts: every e that divides the experts and whose
    // groups of e x t GPUs (experts split like the dense layers) divide
    // the t c R GPUs of a stage.
    const int experts = tf ? tf->experts : 0;
    for (int e = 1; e <= std::max(1, experts); ++e) {
      if (experts > 0 && (experts % e || (t * cp * R) % (e * t))) continue;
    for (int64_t M = 1; M <= batch; ++M) {
      if (batch % M) continue;
      for (const std::string& name : ir::ScheduleNames()) {
        for (int v = 1; v <= L; ++v) {
          const bool chunked = name == "interleaved" || name == "zb-v" || name == "dualpipev";
          if (chunked != (v > 1) || (chunked && (K == 1 || K * v > L))) continue;
          if (name == "interleaved") {
            const bool divides = blocks % K == 0 && (blocks / K) % v == 0;
            if ((v != 2 && v != 4 && v != 8 && !divides) || (knobs.max_chunks > 0 && v > knobs.max_chunks)) continue;
            if (M % K) continue;
          } else if (chunked && v != 2) {
            continue;
          }
          if (name == "dualpipev" && M < 2 * K) continue;
          for (const char* recompute : modes) {
            for (auto sharding : {cost::DataParallelSharding::kNone, cost::DataParallelSharding::kOptimizer,
                                  cost::DataParallelSharding::kFull}) {
              if (sharding != cost::DataParallelSharding::kNone && R * cp == 1) continue;
              if (!tried(knobs.shardings, sharding) && !(sharding == cost::DataParallelSharding::kNone && R * cp == 1)) {
                continue;
              }
            for (const char* cut : {"gpipe", "minmax", "memory"}) {
              auto j = original;
              j["pipeline"] = {{"stages", K}, {"schedule", name}, {"chunks", v}, {"recompute", recompute},
                               {"partition", cut}, {"tensor_parallel", t}, {"sequence_parallel", sp},
                               {"tp_comm_overlap", overlap}, {"context_parallel", cp}};
              if (e > 1) j["pipeline"]["expert_parallel"] = e;
              j["training"]["batch"] = batch;
              j["training"]["microbatches"] = M;
              j["training"]["data_parallel_sharding"] = std::string(ir::NameOf(cost::kDataParallelShardingNames, sharding));
              const cost::Config c = Load(j.dump());
              Point p{j};
              partition::PlanOverrides own;
              own.calibration = calibration;
              own.memory_cap_bytes = std::isfinite(cap) ? cap : 0;
              auto plan = partition::PlanFromConfig(c, own);
              if (plan) {
                auto sim = simulate::Simulate(plan->schedule, cost::CostsFromPlan(c, *plan, calibration));
                EXPECT_TRUE(sim);
                p.throughput = static_cast<double>(batch) * R / sim->step_time_s;
                for (const auto& d : sim->devices) p.peak = std::max(p.peak, d.peak_memory_bytes);
                bool fits = true;
                for (size_t d = 0; d < sim->devices.size(); ++d) {
                  fits = fits && sim->devices[d].peak_memory_bytes <= std::min(cap, c.cluster.devices[d].memory_bytes);
                }
                if (!fits) p.throughput = -1;
              } else {
                p.throughput = -1;
              }
              points.push_back(p);
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
  return points;
}

// The search's best and front against the oracle's (search options `knobs`
// narrowing both alike), uncapped, then capped at the median peak so that
// the cap bites.
void ExpectTheOraclesBestAndFront(const std::string& text, SearchOptions knobs) {
  const int devices = Load(text).cluster.NumDevices();
  const std::vector<Point> uncapped = SimulateEveryPoint(text, 1e18, nullptr, knobs);
  std::vector<double> peaks;
  for (const auto& p : uncapped) peaks.push_back(p.peak);
  std::sort(peaks.begin(), peaks.end());
  for (double cap : {1e18, peaks[peaks.size() / 2]}) {
    SCOPED_TRACE(fmt::format("cap {}", cap));
    const auto points = cap == 1e18 ? uncapped : SimulateEveryPoint(text, cap, nullptr, knobs);
    SearchOptions o = knobs;
    o.memory_cap_bytes = cap;
    auto r = Search(Load(text), o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->configs_evaluated, static_cast<int64_t>(points.size()));
    const Point* best = nullptr;
    int64_t dropped = 0;
    for (const auto& p : points) {
      if (p.throughput < 0) {
        ++dropped;
        continue;
      }
      if (!best || p.throughput > best->throughput ||
          (p.throughput == best->throughput && p.peak < best->peak)) {
        best = &p;
      }
    }
    // Points skipped on their bounds may or may not have fit.
    EXPECT_LE(r->over_cap, dropped);
    EXPECT_GE(r->over_cap + r->configs_bounded, dropped);
    EXPECT_LT(r->configs_simulated, r->configs_evaluated);
    if (cap < 1e18) {
      EXPECT_GT(dropped, 0) << "the cap should bite";
    }
    ASSERT_TRUE(best && r->best);
    EXPECT_NEAR(r->best->throughput, best->throughput, 1e-9 * best->throughput);
    EXPECT_EQ(r->best->peak_memory_bytes, best->peak);
    // The best, written as a config, is a point the oracle simulated alike.
    const auto written = CandidateConfig(nlohmann::ordered_json::parse(text), *r->best, devices, cap);
    const cost::Config c = Load(written.dump());
    auto plan = partition::PlanFromConfig(c);  // the written config's cap
    ASSERT_TRUE(plan);
    auto sim = simulate::Simulate(plan->schedule, cost::CostsFromPlan(c, *plan));
    ASSERT_TRUE(sim);
    EXPECT_NEAR(sim->step_time_s, r->best->step_time_s, 1e-12);
    // Nothing on the front is over the cap, or beaten on both axes.
    for (const auto& a : r->pareto) {
      EXPECT_LE(a.peak_memory_bytes, cap);
      for (const auto& b : r->pareto) {
        EXPECT_FALSE(b.throughput >= a.throughput && b.peak_memory_bytes <= a.peak_memory_bytes &&
                     (b.throughput > a.throughput || b.peak_memory_bytes < a.peak_memory_bytes));
      }
    }
    // Every point that fits is matched or beaten by one on the front.
    for (const auto& p : points) {
      if (p.throughput < 0) continue;
      bool covered = false;
      for (const auto& a : r->pareto) {
        covered = covered || (a.throughput >= p.throughput * (1 - 1e-12) && a.peak_memory_bytes <= p.peak);
      }
      EXPECT_TRUE(covered) << p.config.dump();
    }
  }
}

TEST(Search, BestEqualsTheBestOfSimulatingEveryPointAlone) { ExpectTheOraclesBestAndFront(kConfig, {}); }

// A Llama-class block (GQA, SwiGLU, RMSNorm, RoPE, no bias, fused causal
// attention) in FP8 on 2 nodes of 4 H100s: the grid spans t, sequence
// parallelism and its overlap, context parallelism (up to 4: 2c chunks of
// the 256 tokens), stages, replicas, chunks beyond 2, 4 and 8 (6 blocks: v =
// 3 on two devices), and the three shardings.
const char* kLlamaFp8 = R"({
  "model": {"generator": "transformer", "layers": 6, "d_model": 256, "ffn": 512, "heads": 8, "kv_heads": 2,
            "seq": 256, "vocab": 1024, "dtype": "fp8", "causal": true, "mlp": "swiglu", "norm": "rmsnorm",
            "position": "rope", "bias": false, "attention": "fused"},
  "training": {"batch": 4, "microbatches": 2, "bytes_per_param": 18, "fp8_params": true},
  "pipeline": {"stages": 2, "schedule": "1f1b"},
  "cluster": {"device": "H100-SXM", "devices": 8, "gpus_per_node": 4, "link": "nvlink4", "inter_node_link": "ib-ndr"}
})";

SearchOptions LlamaKnobs() {
  SearchOptions o;
  o.min_context_tokens = 0;
  o.max_context_parallel = 4;
  return o;
}

TEST(Search, NewKnobsBestEqualsTheBestOfSimulatingEveryPointAlone) {
  ExpectTheOraclesBestAndFront(kLlamaFp8, LlamaKnobs());
}

// A mixture of experts (4 experts, top-2, dropless, grouped GEMMs) on two
// nodes of 4 H100s: the grid adds the expert-parallel degree e (1, 2 or 4,
// whatever t, c, K and R leave), and the search still equals simulating
// every point.
const char* kMoe = R"({
  "model": {"generator": "transformer", "layers": 4, "d_model": 256, "ffn": 512, "heads": 8, "kv_heads": 2,
            "seq": 256, "vocab": 1024, "causal": true, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope",
            "bias": false, "attention": "fused", "experts": 4, "top_k": 2, "moe_ffn": 256, "grouped_gemm": true},
  "training": {"batch": 4, "microbatches": 2, "bytes_per_param": 18},
  "pipeline": {"stages": 2, "schedule": "1f1b"},
  "cluster": {"device": "H100-SXM", "devices": 8, "gpus_per_node": 4, "link": "nvlink4", "inter_node_link": "ib-ndr"}
})";

TEST(Search, ExpertParallelBestEqualsTheBestOfSimulatingEveryPointAlone) {
  SearchOptions o;
  o.shardings = {cost::DataParallelSharding::kNone, cost::DataParallelSharding::kOptimizer};
  ExpectTheOraclesBestAndFront(kMoe, o);
}

TEST(Grid, ExpertParallelDegreesDivideTheExpertsAndTheStage) {
  const cost::Config c = Load(kMoe);
  EXPECT_EQ(ExpertParallelDegrees(c, 1, 8), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(ExpertParallelDegrees(c, 2, 4), (std::vector<int>{1, 2}));  // groups of e x 2 in 4 GPUs
  EXPECT_EQ(ExpertParallelDegrees(c, 1, 3), (std::vector<int>{1}));
  EXPECT_EQ(ExpertParallelDegrees(Load(kConfig), 1, 8), (std::vector<int>{1}));  // dense: e = 1 only
  // Experts split over one GPU each whatever t: et = 1 lets e reach the stage's GPUs.
  auto j = nlohmann::ordered_json::parse(kMoe);
  j["pipeline"]["expert_tensor_parallel"] = 1;
  const cost::Config et1 = Load(j.dump());
  EXPECT_EQ(ExpertParallelDegrees(et1, 2, 4), (std::vector<int>{1, 2, 4}));
  j["pipeline"]["tensor_parallel"] = 2;
  j["pipeline"]["sequence_parallel"] = true;
  j["pipeline"]["expert_tensor_parallel"] = 2;
  EXPECT_TRUE(ExpertParallelDegrees(Load(j.dump()), 1, 8).empty());  // et = 2 cannot split t = 1's experts
  // Every grid point is a config that loads.
  int64_t moe_points = 0;
  for (const Candidate& p : Grid(c, 8, 8, SearchOptions{})) {
    const auto written = CandidateConfig(nlohmann::ordered_json::parse(kMoe), p, 8);
    EXPECT_TRUE(cost::LoadConfig(written.dump(), "w.json")) << written.dump();
    moe_points += p.expert_parallel > 1;
    if (HasFailure()) break;
  }
  EXPECT_GT(moe_points, 0);
}

// The grid of kLlamaFp8 holds every new knob, and each restriction takes it out.
// The evaluator shares partitions, costs and simulations between points
// whose keys are equal: every memory-partitioned point it plans, in the
// grid's order, equals its config planned and simulated alone. Here the
// weights fill the GPUs (4.8 G parameters on 40 GB A100s), so whether a
// memory partition exists, and where it cuts, turns on the sharding: a key
// without it shares one sharding's cut with another's.
TEST(Evaluator, EveryMemoryPartitionedPointEqualsItsConfigAlone) {
  const char* text = R"({
    "model": {"generator": "transformer", "layers": 6, "d_model": 8192, "heads": 64, "seq": 128, "vocab": 1024},
    "training": {"batch": 16, "microbatches": 4, "bytes_per_param": 16},
    "pipeline": {"stages": 2, "schedule": "1f1b", "partition": "memory"},
    "cluster": {"device": "A100-40GB", "devices": 4, "gpus_per_node": 4, "link": "nvlink3"}
  })";
  const auto original = nlohmann::ordered_json::parse(text);
  const cost::Config c = Load(text);
  const int devices = c.cluster.NumDevices();
  Evaluator evaluator(c, 0, nullptr);
  int fitting = 0, none = 0, shardings_differ = 0;
  std::map<std::string, std::pair<bool, bool>> by_sharding;  // the point but its sharding: {none fits, sharded fits}
  for (const Candidate& point : Grid(evaluator.work(), devices, c.training.batch * c.Replicas(), SearchOptions{})) {
    if (point.partition != cost::PartitionAlgorithm::kMemory) continue;
    const std::optional<Candidate> got = evaluator.Simulate(point);
    const auto written = CandidateConfig(original, point, devices, 0);
    const cost::Config alone = Load(written.dump());
    auto plan = partition::PlanFromConfig(alone);
    SCOPED_TRACE(written.dump());
    bool fits = false;
    if (!plan) {
      EXPECT_FALSE(got);
      ++none;
    } else {
      auto sim = simulate::Simulate(plan->schedule, cost::CostsFromPlan(alone, *plan));
      ASSERT_TRUE(sim);
      ASSERT_TRUE(got);
      double peak = 0;
      fits = true;
      for (size_t d = 0; d < sim->devices.size(); ++d) {
        peak = std::max(peak, sim->devices[d].peak_memory_bytes);
        fits = fits && sim->devices[d].peak_memory_bytes <= alone.cluster.devices[d].memory_bytes;
      }
      EXPECT_EQ(got->fits, fits);
      EXPECT_NEAR(got->step_time_s, sim->step_time_s, 1e-12 * sim->step_time_s);
      EXPECT_EQ(got->peak_memory_bytes, peak);
      fitting += fits;
    }
    auto key = written;
    key["training"].erase("data_parallel_sharding");
    auto& seen = by_sharding[key.dump()];
    (point.sharding == cost::DataParallelSharding::kNone ? seen.first : seen.second) |= fits;
    if (HasFailure()) return;
  }
  for (const auto& [key, fit] : by_sharding) shardings_differ += fit.first != fit.second;
  // The case the test is for: points that fit sharded and not unsharded.
  EXPECT_GT(shardings_differ, 0);
  EXPECT_GT(fitting, 0);
  EXPECT_GT(none, 0);
}

TEST(Grid, SpansTheNewKnobsAndTheOptionsNarrowThem) {
  const cost::Config c = Load(kLlamaFp8);
  auto count = [&](const SearchOptions& o, auto&& pred) {
    int64_t n = 0;
    for (const Candidate& p : Grid(c, 8, 4, o)) n += pred(p);
    return n;
  };
  auto cp = [](const Candidate& p) { return p.context_parallel > 1; };
  auto overlap = [](const Candidate& p) { return p.tp_comm_overlap; };
  auto full = [](const Candidate& p) { return p.sharding == cost::DataParallelSharding::kFull; };
  auto v3 = [](const Candidate& p) { return p.chunks == 3; };
  auto bad = [](const Candidate& p) {
    return (p.tp_comm_overlap && !p.sequence_parallel) ||
           (p.sharding != cost::DataParallelSharding::kNone && p.replicas * p.context_parallel == 1) ||
           p.tensor_parallel * p.context_parallel * p.stages * p.replicas != 8 || 256 % (2 * p.context_parallel) ||
           (p.chunks == 3 && p.stages != 2) || p.chunks == 6;
  };
  SearchOptions o = LlamaKnobs();
  EXPECT_EQ(count(o, bad), 0);
  EXPECT_GT(count(o, cp), 0);
  EXPECT_GT(count(o, overlap), 0);
  EXPECT_GT(count(o, full), 0);
  EXPECT_GT(count(o, v3), 0);
  EXPECT_EQ(count(o, [](const Candidate& p) { return p.context_parallel > 4; }), 0);
  o.max_context_parallel = 0;
  EXPECT_GT(count(o, [](const Candidate& p) { return p.context_parallel == 8; }), 0);
  o.min_context_tokens = 64;  // 256 tokens: c up to 4
  EXPECT_EQ(count(o, [](const Candidate& p) { return p.context_parallel > 4; }), 0);
  o.tp_comm_overlap = {false};
  o.shardings = {cost::DataParallelSharding::kNone, cost::DataParallelSharding::kOptimizer};
  o.max_chunks = 2;
  EXPECT_EQ(count(o, overlap), 0);
  EXPECT_EQ(count(o, full), 0);
  EXPECT_EQ(count(o, v3), 0);
  // The default keeps short sequences' searches without c.
  EXPECT_EQ(count(SearchOptions{}, cp), 0);
}

// The bounds that let the search skip simulations hold for every point:
// no simulated throughput above its bound, no simulated peak below its.
TEST(Search, BoundsHoldForEveryPoint) {
  std::string blocking = kConfig;  // Megatron's transfers, which hold compute
  blocking.replace(blocking.find(R"("schedule": "1f1b")"), 18, R"("schedule": "1f1b", "p2p": "blocking")");
  // Recompute per layer (Megatron's), its kept inputs distributed or not.
  std::string layered = kConfig, distributed = kConfig;
  const std::string one_f_one_b = R"("stages": 4, "schedule": "1f1b")";
  layered.replace(layered.find(one_f_one_b), one_f_one_b.size(),
                  R"("stages": 4, "schedule": "1f1b", "recompute_granularity": "layer")");
  distributed.replace(distributed.find(one_f_one_b), one_f_one_b.size(),
                      R"("stages": 2, "schedule": "1f1b", "tensor_parallel": 2, "recompute_granularity": "layer", )"
                      R"("distribute_saved_activations": true)");
  for (const char* schedule_config : {kConfig, blocking.c_str(), layered.c_str(), distributed.c_str(), R"({
    "model": {"generator": "cnn", "layers": 8, "channels": 16, "image": 32, "classes": 10},
    "training": {"batch": 16, "microbatches": 4},
    "pipeline": {"stages": 4},
    "cluster": {"device": "V100", "devices": 4, "link": "pcie3-host-staged"}})", R"({
    "model": {"generator": "mlp", "layers": 8, "width": 256, "input": 64, "classes": 10, "norm": "layernorm"},
    "training": {"batch": 64, "microbatches": 8},
    "pipeline": {"stages": 2},
    "cluster": {"device": "CPU", "devices": 4, "link": "inproc"}})"}) {
    SearchOptions o;
    o.check_bounds = true;
    auto r = Search(Load(schedule_config), o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->configs_bounded, 0);
    EXPECT_GT(r->configs_simulated, 100);
  }
  // Recompute per layer under caps that bite: a recomputed stage holds its
  // kept inputs and one layer's work, never its whole stash, and the
  // totals' shortcut must not count the stash there.
  // Checks every point's bounds under caps at these shares of the sorted
  // simulated peaks.
  auto under_caps = [](const std::string& config, std::initializer_list<int> sixtieths) {
    std::vector<double> peaks;
    for (const auto& p : SimulateEveryPoint(config, 1e18)) peaks.push_back(p.peak);
    std::sort(peaks.begin(), peaks.end());
    for (int share : sixtieths) {
      SearchOptions o;
      o.check_bounds = true;
      o.memory_cap_bytes = peaks[peaks.size() * share / 60];
      auto r = Search(Load(config), o);
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_GT(r->over_cap, 0);
    }
  };
  for (const std::string& config : {layered, distributed}) under_caps(config, {3, 15});
  // FP8, context parallelism, overlap and sharding (the sharded static
  // bytes, the sharded step, FSDP's gathers beside compute).
  {
    SearchOptions o = LlamaKnobs();
    o.check_bounds = true;
    auto r = Search(Load(kLlamaFp8), o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_GT(r->configs_simulated, 100);
    // and under a cap that bites
    o.memory_cap_bytes = r->pareto.back().peak_memory_bytes * 1.5;
    auto capped = Search(Load(kLlamaFp8), o);
    ASSERT_TRUE(capped) << capped.error().message;
    EXPECT_GT(capped->over_cap, 0);
  }
  // Expert parallelism: the experts' optimizer state over their own
  // data-parallel group, the all-to-alls in the ops, under a cap that bites.
  {
    SearchOptions o;
    o.check_bounds = true;
    auto r = Search(Load(kMoe), o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_GT(r->configs_simulated, 100);
    o.memory_cap_bytes = r->pareto.back().peak_memory_bytes * 1.5;
    auto capped = Search(Load(kMoe), o);
    ASSERT_TRUE(capped) << capped.error().message;
    EXPECT_GT(capped->over_cap, 0);
  }
  // Under caps that bite, where the throughput bound counts on a fitting
  // point holding few micro-batches at once (the auto schedule's case).
  under_caps(kConfig, {6, 15, 30});
}

// With fitted costs (search --calibration) the bounds still hold, and the
// best is the oracle's under the same calibration, not the catalogue's.
TEST(Search, CalibratedCostsDriveBoundsAndSimulationsAlike) {
  simulate::Calibration cal;
  cal.device = "A100-40GB";
  // Scales well above 1: the calibrated op takes several times the
  // kernels' GPU time, which for this small model is below its host's
  // launch time, so a scale of a few would not make it slower.
  cal.compute["F"] = simulate::OpFit{2e-4, {{"transformer_block", 30.0}}, 10};
  cal.compute["B"] = simulate::OpFit{5e-4, {{"transformer_block", 25.0}, {"head", 5.0}}, 10};
  cal.latency_s = 3e-4;
  cal.bandwidth = 2e9;
  cal.step_overhead_s = 1e-3;
  cal.step_seconds_per_param = 2e-10;
  SearchOptions o;
  o.calibration = &cal;
  o.check_bounds = true;  // fails the search if a calibrated simulation beats its calibrated bounds
  auto checked = Search(Load(kConfig), o);
  ASSERT_TRUE(checked) << checked.error().message;
  o.check_bounds = false;
  auto r = Search(Load(kConfig), o);
  ASSERT_TRUE(r && r->best);
  double best = 0, best_uncalibrated = 0;
  for (const auto& p : SimulateEveryPoint(kConfig, 1e18, &cal)) best = std::max(best, p.throughput);
  for (const auto& p : SimulateEveryPoint(kConfig, 1e18)) best_uncalibrated = std::max(best_uncalibrated, p.throughput);
  EXPECT_NEAR(r->best->throughput, best, 1e-9 * best);
  EXPECT_NEAR(checked->best->throughput, best, 1e-9 * best);
  EXPECT_LT(best, 0.9 * best_uncalibrated);  // the calibration made every op slower: it was used
}

TEST(Search, MemoryObjectivePicksTheSmallestPeak) {
  auto r = Search(Load(kConfig), {.objective = Objective::kMemory});
  ASSERT_TRUE(r && r->best);
  for (const auto& c : r->pareto) EXPECT_GE(c.peak_memory_bytes, r->best->peak_memory_bytes);
  EXPECT_EQ(r->best->peak_memory_bytes, r->pareto.back().peak_memory_bytes);
}

TEST(Search, DevicesResizeAHomogeneousClusterOnly) {
  auto r = Search(Load(kConfig), {.devices = 2});
  ASSERT_TRUE(r);
  EXPECT_LE(r->best->stages * r->best->replicas, 2);
  auto hetero = Load(R"({
    "model": {"generator": "mlp", "layers": 4, "width": 8, "input": 4, "classes": 3},
    "training": {"batch": 4, "microbatches": 2},
    "pipeline": {"stages": 2},
    "cluster": {"device": ["H100-SXM", "A100-40GB"], "devices": 2}})");
  auto bad = Search(hetero, {.devices = 4});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/cluster/device lists 2 devices one by one"), std::string::npos);
}

// The config as a grid point: each knob the config's, and written back it is
// the same run (the same step simulated). The bindings name every member of
// Candidate: one added stops this compiling until CandidateOf (and this
// test) set it.
TEST(Search, CandidateOfAConfigIsThatConfig) {
  const std::string text = R"({
    "model": {"generator": "transformer", "layers": 8, "d_model": 512, "heads": 8, "seq": 256, "vocab": 1024,
              "attention": "fused", "dtype": "bf16", "experts": 4, "top_k": 2, "moe_ffn": 1024},
    "training": {"batch": 8, "microbatches": 4, "bytes_per_param": 18, "data_parallel_sharding": "optimizer"},
    "pipeline": {"stages": 2, "schedule": "interleaved", "chunks": 2, "recompute": "selective", "partition": "gpipe",
                 "tensor_parallel": 2, "sequence_parallel": true, "tp_comm_overlap": true, "context_parallel": 2,
                 "expert_parallel": 2},
    "cluster": {"device": "H100-SXM", "devices": 16, "gpus_per_node": 8, "link": "nvlink4",
                "inter_node_link": "ib-ndr"}})";
  const cost::Config c = Load(text);
  const Candidate k = CandidateOf(c);
  {
    [[maybe_unused]] const auto& [stages, replicas, t, sp, overlap, cp, e, sharding, M, schedule, chunks, recompute,
                                     partition, batch, step, throughput, bubble, peak, fits] = k;
  }
  EXPECT_EQ(k.stages, 2);
  EXPECT_EQ(k.replicas, 2);
  EXPECT_EQ(k.tensor_parallel, 2);
  EXPECT_TRUE(k.sequence_parallel);
  EXPECT_TRUE(k.tp_comm_overlap);
  EXPECT_EQ(k.context_parallel, 2);
  EXPECT_EQ(k.expert_parallel, 2);
  EXPECT_EQ(k.sharding, cost::DataParallelSharding::kOptimizer);
  EXPECT_EQ(k.micro_batches, 4);
  EXPECT_EQ(k.schedule, "interleaved");
  EXPECT_EQ(k.chunks, 2);
  EXPECT_EQ(k.recompute, ir::RecomputeMode::kSelective);
  EXPECT_EQ(k.partition, cost::PartitionAlgorithm::kGpipe);
  EXPECT_EQ(k.batch, 8);
  auto step = [](const cost::Config& config) {
    auto plan = partition::PlanFromConfig(config);
    EXPECT_TRUE(plan) << plan.error().message;
    return simulate::Simulate(plan->schedule, cost::CostsFromPlan(config, *plan))->step_time_s;
  };
  const cost::Config written = Load(CandidateConfig(nlohmann::ordered_json::parse(text), k, 16).dump());
  EXPECT_EQ(step(written), step(c));
}

// Searched without a cap of its own, a config's /pipeline/memory_cap still
// cuts its memory partition (and plans its auto schedule), as the config
// written for the point does: the evaluator's step is the written config's.
TEST(Evaluator, KeepsTheConfigsMemoryCapWithoutOneOfItsOwn) {
  std::string text = R"({
    "model": {"generator": "transformer", "layers": 24, "d_model": 1024, "ffn": 4096, "heads": 16, "seq": 512,
              "vocab": 32000, "dtype": "bf16"},
    "training": {"batch": 128, "microbatches": 16},
    "pipeline": {"stages": 4, "schedule": "1f1b", "recompute": "none", "partition": "memory"},
    "cluster": {"device": "H100-SXM", "devices": 4, "link": "nvlink4"}})";
  auto simulated = [](const cost::Config& c) {
    auto plan = partition::PlanFromConfig(c);
    EXPECT_TRUE(plan) << plan.error().message;
    return simulate::Simulate(plan->schedule, cost::CostsFromPlan(c, *plan))->step_time_s;
  };
  const cost::Config free = Load(text);
  auto plan = partition::PlanFromConfig(free);
  ASSERT_TRUE(plan);
  double worst = 0;
  for (const auto& cell : plan->partition.cells) worst = std::max(worst, cell.peak_memory_bytes);
  text.replace(text.find("\"partition\": \"memory\""), 21,
               fmt::format("\"partition\": \"memory\", \"memory_cap\": {}", 0.98 * worst));
  const cost::Config capped = Load(text);
  ASSERT_NE(simulated(capped), simulated(free));  // the cap moves the cut
  Evaluator evaluator(capped, /*memory_cap_bytes=*/0, nullptr);
  auto point = evaluator.Simulate(CandidateOf(capped));
  ASSERT_TRUE(point);
  const cost::Config written = Load(CandidateConfig(nlohmann::ordered_json::parse(text), *point, 4).dump());
  EXPECT_EQ(written.pipeline.memory_cap, capped.pipeline.memory_cap);
  EXPECT_EQ(point->step_time_s, simulated(written));
}

// More GPUs than any split can use is bad input that says how many can be
// used (8 layers of 256 samples: 2,048 GPUs), not a search that "fits nothing".
TEST(Search, RefusesAGpuCountNoConfigurationSplits) {
  const cost::Config mlp = Load(R"({
    "model": {"generator": "mlp", "layers": 8, "width": 16, "input": 4, "classes": 3},
    "training": {"batch": 256, "microbatches": 8},
    "pipeline": {"stages": 2},
    "cluster": {"device": "H100-SXM", "devices": 2}})");
  auto too_many = Search(mlp, {.devices = 4096});
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(too_many.error().message.find("s.json: no configuration of 4096 GPUs"), std::string::npos)
      << too_many.error().message;
  EXPECT_NE(too_many.error().message.find("uses at most 2048 GPUs"), std::string::npos) << too_many.error().message;
  EXPECT_TRUE(Search(mlp, {.devices = 2048}));  // 8 stages of 256 replicas of one sample
  // 1,000 GPUs: no K <= 8 stages leaves replicas dividing 256 (8 x 125 at best).
  auto odd = Search(mlp, {.devices = 1000});
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("no such split makes 1000"), std::string::npos) << odd.error().message;
}

// Whether `base` regenerated with `layers` on K pipeline devices under
// `mode` fits `cap` on every device, planned and simulated alone with the
// time-balanced cut or the memory-aware one, cut to the cap or to the
// devices' memory (the --max-layers oracle).
// `devices`: the GPUs kept (K: one replica; 0: the config's, the rest replicas).
bool FitsAlone(const cost::Config& base, int K, ir::RecomputeMode mode, int layers, double cap, int devices) {
  cost::Config c = base;
  cost::Regenerate(c, layers);
  c.pipeline.stages = K;
  c.pipeline.recompute = mode;
  if (devices > 0) c.cluster.devices.resize(devices);
  // The memory cut to the cap, and to the devices' memory (a cut under the
  // cap it finds, the capped one must find too).
  for (const auto& [cut, cut_cap] : {std::pair{cost::PartitionAlgorithm::kMinMax, 0.0},
                                     std::pair{cost::PartitionAlgorithm::kMemory, cap},
                                     std::pair{cost::PartitionAlgorithm::kMemory, 0.0}}) {
    c.pipeline.partition = cut;
    c.pipeline.memory_cap = cut_cap;
    auto plan = partition::PlanFromConfig(c);
    if (!plan) continue;
    auto sim = simulate::Simulate(plan->schedule, cost::CostsFromPlan(c, *plan));
    bool ok = true;
    for (const auto& d : sim->devices) ok = ok && d.peak_memory_bytes <= cap;
    if (ok) return true;
  }
  return false;
}

// The oracle for --max-layers: the reported depth fits, one layer more does not.
TEST(MaxLayers, ReportedDepthFitsAndOneMoreDoesNot) {
  const std::string text = R"({
    "model": {"generator": "transformer", "layers": 4, "d_model": 512, "heads": 8, "seq": 256, "vocab": 1000},
    "training": {"batch": 32, "microbatches": 8},
    "pipeline": {"stages": 1, "schedule": "gpipe"},
    "cluster": {"device": "A100-40GB", "devices": 4, "link": "nvlink3"}})";
  const cost::Config base = Load(text);
  const double cap = 4e9;
  auto rows = MaxLayers(base, {.memory_cap_bytes = cap});
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 6u);  // K = 1, 2, 4; recompute none and full
  auto fits = [&](int K, ir::RecomputeMode mode, int layers) { return FitsAlone(base, K, mode, layers, cap, K); };
  for (const auto& row : *rows) {
    SCOPED_TRACE(fmt::format("K={} recompute {}", row.stages, ir::RecomputeModeName(row.recompute)));
    ASSERT_GT(row.max_layers, 0);
    EXPECT_TRUE(fits(row.stages, row.recompute, row.max_layers));
    EXPECT_FALSE(fits(row.stages, row.recompute, row.max_layers + 1));
    EXPECT_LE(row.peak_memory_bytes, cap);
  }
  // Table 1's shape: more devices and recompute hold deeper models.
  for (size_t i = 0; i + 2 < rows->size(); i += 2) {
    EXPECT_GT((*rows)[i + 2].max_layers, (*rows)[i].max_layers);
    EXPECT_GT((*rows)[i + 1].max_layers, (*rows)[i].max_layers);
  }
}

// --max-layers keeps the config's other knobs: with the optimizer sharded
// over the replicas the devices left by K are, each row is the depth that
// config fits simulated alone (before, every row was of an unsharded run).
TEST(MaxLayers, KeepsTheConfigsSharding) {
  const std::string text = R"({
    "model": {"generator": "transformer", "layers": 4, "d_model": 1024, "heads": 8, "seq": 256, "vocab": 1000},
    "training": {"batch": 8, "microbatches": 4, "bytes_per_param": 18, "data_parallel_sharding": "optimizer"},
    "pipeline": {"stages": 1, "schedule": "1f1b"},
    "cluster": {"device": "A100-40GB", "devices": 4, "link": "nvlink3"}})";
  const cost::Config base = Load(text);
  const double cap = 2e9;
  auto rows = MaxLayers(base, {.memory_cap_bytes = cap});
  ASSERT_TRUE(rows) << rows.error().message;
  auto fits = [&](const cost::Config& from, int K, ir::RecomputeMode mode, int layers) {
    return FitsAlone(from, K, mode, layers, cap, 0);
  };
  cost::Config unsharded = base;
  unsharded.training.sharding = cost::DataParallelSharding::kNone;
  int deeper = 0;
  for (const auto& row : *rows) {
    SCOPED_TRACE(fmt::format("K={} recompute {}", row.stages, ir::RecomputeModeName(row.recompute)));
    ASSERT_GT(row.max_layers, 0);
    EXPECT_TRUE(fits(base, row.stages, row.recompute, row.max_layers));
    EXPECT_FALSE(fits(base, row.stages, row.recompute, row.max_layers + 1));
    // Where replicas share the optimizer, the sharded run holds more layers.
    if (!fits(unsharded, row.stages, row.recompute, row.max_layers)) ++deeper;
  }
  EXPECT_GT(deeper, 0);
}

TEST(MaxLayers, NeedsAGeneratorModel) {
  auto c = Load(R"({
    "model": {"layers": [{"name": "a", "fwd_flops": 1e9, "params": 10, "out_bytes": 4},
                         {"name": "b", "fwd_flops": 1e9, "params": 10, "out_bytes": 4}]},
    "training": {"batch": 4, "microbatches": 2},
    "pipeline": {"stages": 2},
    "cluster": {"device": "H100-SXM", "devices": 2}})");
  auto r = MaxLayers(c, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("needs a generator model"), std::string::npos);
}

}  // namespace
}  // namespace twinpipe::search
