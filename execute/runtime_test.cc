#include "partition/pipeline_plan.h"
#include "execute/runtime.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <random>

#include "ir/builders.h"
#include "ir/torch_csv.h"
#include "ir/passes.h"
#include "execute/model.h"
#include "execute/optimizer.h"
#include "execute/sync.h"
#include "cost_models/plan_costs.h"
#include "simulate/engine.h"

namespace twinpipe::execute {
namespace {

cost::Config Mlp(int stages, int micro_batches, const std::string& schedule, const std::string& recompute,
                 const std::string& extra_model = "", const std::string& optimizer = "sgd", int batch = 16,
                 int width = 16, int replicas = 1) {
  const std::string text = fmt::format(R"({{
    "model": {{"generator": "mlp", "layers": 8, "width": {}, "input": 12, "classes": 5, "norm": "layernorm",
               "residual": true {}}},
    "training": {{"batch": {}, "microbatches": {}, "optimizer": "{}", "learning_rate": 0.01, "seed": 3}},
    "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "{}"}},
    "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                                       width, extra_model, batch, micro_batches, optimizer, stages, schedule, recompute,
                                       stages * replicas);
  // extra_model overrides the base's keys (nlohmann keeps the last of a key
  // given twice; the config reader would refuse it).
  auto c = cost::LoadConfig(nlohmann::json::parse(text).dump(), "t.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// The worst relative difference of two runs' parameters and running
// statistics (ExecuteResult::state).
double WorstDifference(const ExecuteResult& r, const ExecuteResult& reference) {
  EXPECT_EQ(r.parameters.size(), reference.parameters.size());
  EXPECT_EQ(r.state.size(), reference.state.size());
  double worst = 0;
  auto compare = [&](double a, double b) { worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b))); };
  for (size_t i = 0; i < std::min(r.parameters.size(), reference.parameters.size()); ++i) {
    compare(r.parameters[i], reference.parameters[i]);
  }
  for (size_t i = 0; i < std::min(r.state.size(), reference.state.size()); ++i) compare(r.state[i], reference.state[i]);
  return worst;
}

ExecuteResult Train(const cost::Config& c, int steps) {
  auto plan = partition::PlanFromConfig(c);
  EXPECT_TRUE(plan) << plan.error().message;
  auto r = ExecuteCpu(c, *plan, {steps, 10});
  EXPECT_TRUE(r) << r.error().message;
  return *r;
}

// How each worker's step ended, when it ended in an error (by cluster
// device), as the runtime tells it (ExecuteOptions::on_worker_error).
class WorkerEnds {
 public:
  // `options` with the hook that records here.
  ExecuteOptions Recording(ExecuteOptions options) {
    options.on_worker_error = [this](int device, const Error& e) {
      std::lock_guard lock(mu_);
      EXPECT_TRUE(ends_.emplace(device, e).second) << "device " << device << " ended twice";
    };
    return options;
  }
  std::map<int, Error> ends() {
    std::lock_guard lock(mu_);
    return ends_;
  }

 private:
  std::mutex mu_;
  std::map<int, Error> ends_;
};

TEST(Execute, GPipeGuaranteeParametersDoNotDependOnKOrM) {
  const ExecuteResult reference = Train(Mlp(1, 1, "gpipe", "none"), 3);
  // The comparison can fail: training moves the weights well beyond the
  // tolerance, and so does another mini-batch split that changed the data.
  const ExecuteResult one_step = Train(Mlp(1, 1, "gpipe", "none"), 1);
  double moved = 0;
  for (size_t i = 0; i < one_step.parameters.size(); ++i) {
    moved = std::max(moved, static_cast<double>(std::abs(one_step.parameters[i] - reference.parameters[i])));
  }
  EXPECT_GT(moved, 1e-3);
  int runs = 0;
  for (int K : {1, 2, 3, 4}) {
    for (int M : {1, 2, 4, 8}) {
      for (const std::string& schedule : ir::BuilderNames()) {
        if (schedule == "interleaved" && M % K != 0) continue;  // Megatron's rule, refused at load
        if (schedule == "dualpipev" && M < 2 * K) continue;    // DeepSeek's, likewise
        for (const char* recompute : {"none", "full", "except-last"}) {
          const ExecuteResult r = Train(Mlp(K, M, schedule, recompute), 3);
          EXPECT_LE(WorstDifference(r, reference), 1e-5) << "K=" << K << " M=" << M << " " << schedule << " " << recompute;
          ++runs;
        }
      }
    }
  }
  // naive, gpipe, 1f1b; zb-h1, zb-h2, zb-v; interleaved where M % K == 0; dualpipev where M >= 2K (7 of (K, M))
  EXPECT_EQ(runs, 144 + 3 * 48 + 27 + 21);
}

// `auto` trains to the unpartitioned weights like every builder: the order
// it finds with the config's own costs, and the orders it finds for random
// op times, memory and limits.
TEST(Execute, AutoScheduleTrainsToTheUnpartitionedWeights) {
  const ExecuteResult reference = Train(Mlp(1, 1, "gpipe", "none"), 3);
  std::mt19937 rng(11);
  int runs = 0;
  for (int K = 1; K <= 8; ++K) {
    for (int M : {1, 4, 8}) {
      for (const char* recompute : {"none", "full", "except-last"}) {
        SCOPED_TRACE(fmt::format("K={} M={} {}", K, M, recompute));
        const cost::Config c = Mlp(K, M, "auto", recompute);
        auto plan = partition::PlanFromConfig(c);
        ASSERT_TRUE(plan) << plan.error().message;
        auto random = ir::BuildAuto(ir::RandomAutoProblem(K, M, static_cast<uint32_t>(rng())));
        ASSERT_TRUE(random) << random.error().message;
        ir::InsertRecompute(*random, *ir::RecomputeModeFromName(recompute));
        ASSERT_TRUE(ir::InsertComm(*random, {}));
        auto random_plan = partition::PlanForSchedule(c, std::move(*random));
        ASSERT_TRUE(random_plan) << random_plan.error().message;
        for (const cost::Plan* run : {&*plan, &*random_plan}) {
          auto r = ExecuteCpu(c, *run, {3, 10});
          ASSERT_TRUE(r) << r.error().message;
          EXPECT_LE(WorstDifference(*r, reference), 1e-5);
          ++runs;
        }
      }
    }
  }
  EXPECT_EQ(runs, 8 * 3 * 3 * 2);
}

// Schedules written by torch.distributed.pipelining (zero-bubble with I/W,
// DualPipeV with its V placement and overlapped F/B) train to the
// unpartitioned run's weights too.
TEST(Execute, TorchFixturesTrainToTheUnpartitionedWeights) {
  struct Fixture { const char* file; int devices, micro_batches; };
  for (const Fixture& f : {Fixture{"zb1p_2rank_2stagep_compute.csv", 2, 8}, Fixture{"zb1p_2rank_2stagep_comms.csv", 2, 8},
                           Fixture{"dualpipev_4rank_10mb.csv", 4, 10}}) {
    SCOPED_TRACE(f.file);
    std::ifstream in(std::string(TWINPIPE_TORCH_DIR) + "/" + f.file);
    ASSERT_TRUE(in) << "missing fixture";
    const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto imported = ir::ImportTorchCsv(csv, f.file, ir::TorchDialect::kAuto);
    ASSERT_TRUE(imported) << imported.error().message;
    const cost::Config c = Mlp(f.devices, f.micro_batches, "gpipe", "none", "", "sgd", 2 * f.micro_batches);
    auto plan = partition::PlanForSchedule(c, imported->schedule);
    ASSERT_TRUE(plan) << plan.error().message;
    auto r = ExecuteCpu(c, *plan, {3, 10});
    ASSERT_TRUE(r) << r.error().message;
    const ExecuteResult reference = Train(Mlp(1, 1, "gpipe", "none", "", "sgd", 2 * f.micro_batches), 3);
    ASSERT_EQ(r->parameters.size(), reference.parameters.size());
    for (size_t i = 0; i < r->parameters.size(); ++i) {
      ASSERT_NEAR(r->parameters[i], reference.parameters[i], 1e-5 * std::max(1.f, std::abs(reference.parameters[i])));
    }
  }
}

// The failing op's device reports the op's token and the failure; every
// other device was stopped (aborted: its receive woken, its barrier opened)
// rather than left to wait for the failed device until its timeout, whose
// error would be a runtime one saying it timed out.
TEST(Execute, AFailingOpStopsEveryDeviceNamingIt) {
  const cost::Config c = Mlp(4, 8, "1f1b", "none");
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  for (int32_t op : {0, 7, static_cast<int32_t>(plan->schedule.NumOps() - 1)}) {
    SCOPED_TRACE(fmt::format("op {}", op));
    WorkerEnds ends;
    auto r = ExecuteCpu(c, *plan, ends.Recording({.steps = 2, .timeout_s = 30, .fail_op = op}));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
    const ir::Op* failing = nullptr;
    for (const auto& p : plan->schedule.programs) {
      for (const auto& o : p) failing = o.id == op ? &o : failing;
    }
    const std::string fault = ir::OpToken(*failing) + " failed: injected fault";
    EXPECT_NE(r.error().message.find(fault), std::string::npos) << r.error().message;
    const std::map<int, Error> ended = ends.ends();
    ASSERT_EQ(ended.size(), 4u);
    for (const auto& [device, e] : ended) {
      if (device == failing->device) {
        EXPECT_EQ(e.kind, ErrorKind::kRuntime);
        EXPECT_NE(e.message.find(fault), std::string::npos) << e.message;
      } else {
        EXPECT_EQ(e.kind, ErrorKind::kAborted) << "device " << device << ": " << e.message;
      }
    }
  }
}

// Data-parallel replicas: R pipelines on rows r*N..(r+1)*N-1 of a global
// batch of R*N, averaging their gradients at ALLREDUCE, end where one
// unpartitioned run on the global batch ends, for every schedule and
// recompute mode, with SGD and with Adam (whose step is not linear in the
// gradient: a wrong average would show).
TEST(Execute, ReplicasTrainToTheUnpartitionedWeightsOfTheGlobalBatch) {
  int runs = 0;
  for (const char* optimizer : {"sgd", "adam"}) {
    for (int R : {2, 3}) {
      const ExecuteResult reference = Train(Mlp(1, 1, "gpipe", "none", "", optimizer, 16 * R), 3);
      // Without the other replicas' rows the weights differ: the test can fail.
      const ExecuteResult alone = Train(Mlp(1, 1, "gpipe", "none", "", optimizer, 16), 3);
      EXPECT_GT(WorstDifference(alone, reference), 1e-4);
      for (int K : {1, 2, 3}) {
        for (int M : {1, 4}) {
          for (const std::string& schedule : ir::BuilderNames()) {
            if (schedule == "interleaved" && M % K != 0) continue;
            if (schedule == "dualpipev" && M < 2 * K) continue;
            for (const char* recompute : {"none", "full", "except-last"}) {
              if (std::string(optimizer) == "adam" && (R == 3 || std::string(recompute) == "except-last")) continue;
              const cost::Config c = Mlp(K, M, schedule, recompute, "", optimizer, 16, 16, R);
              auto plan = partition::PlanFromConfig(c);
              ASSERT_TRUE(plan) << plan.error().message;
              ASSERT_EQ(plan->schedule.replicas, R);
              auto r = ExecuteCpu(c, *plan, {3, 10});
              ASSERT_TRUE(r) << r.error().message;
              // Adam divides by sqrt(v): near-zero gradients magnify rounding (as in AdamToo).
              EXPECT_LE(WorstDifference(*r, reference), std::string(optimizer) == "adam" ? 1e-4 : 1e-5)
                  << optimizer << " R=" << R << " K=" << K << " M=" << M << " " << schedule << " " << recompute;
              EXPECT_EQ(r->peak_memory_bytes.size(), static_cast<size_t>(K * R));
              ++runs;
            }
          }
        }
      }
    }
  }
  // Per optimizer and R: 6 builders x 3 K x 2 M, interleaved where M % K == 0 (3) and dualpipev where
  // M >= 2K (2), in each recompute mode: SGD with R = 2 and 3 in 3 modes, Adam with R = 2 in 2.
  EXPECT_EQ(runs, 2 * 41 * 3 + 41 * 2);
}

// ALLREDUCE runs beside the compute, as the simulator assumes: the CPU
// backend queues it on the device's all-reduce stream (a HostStream), whose
// jobs run on a thread of their own while the caller goes on. Here a job
// waits for what its caller does only after queueing it; run in the caller,
// it would wait in vain. (How much the all-reduces overlap the backward in a
// real run is measured in bench/execute_benchmark.cc.)
TEST(Execute, AllReduceStreamRunsBesideItsCaller) {
  HostStream stream;
  std::mutex mu;
  std::condition_variable cv;
  bool caller_went_on = false, job_saw_it = false;
  stream.Enqueue([&]() -> Result<void> {
    std::unique_lock lock(mu);
    // A guard against hanging, not a measurement: the caller goes on at once.
    job_saw_it = cv.wait_for(lock, std::chrono::seconds(60), [&] { return caller_went_on; });
    return {};
  });
  {
    std::lock_guard lock(mu);
    caller_went_on = true;
  }
  cv.notify_all();
  ASSERT_TRUE(stream.Wait(std::chrono::steady_clock::time_point::max()));
  std::lock_guard lock(mu);
  EXPECT_TRUE(job_saw_it);
}

TEST(Execute, AFailureInOneReplicaStopsEveryReplica) {
  const cost::Config c = Mlp(2, 4, "1f1b", "none", "", "sgd", 16, 16, 3);
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  const ir::Op* failing = nullptr;
  for (const auto& p : plan->schedule.programs) {
    for (const auto& o : p) failing = o.id == 3 ? &o : failing;
  }
  WorkerEnds ends;
  auto r = ExecuteCpu(c, *plan, ends.Recording({.steps = 2, .timeout_s = 30, .fail_op = 3}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(r.error().message.find("failed: injected fault"), std::string::npos) << r.error().message;
  const std::map<int, Error> ended = ends.ends();
  ASSERT_EQ(ended.size(), 6u);  // 2 devices x 3 replicas
  for (const auto& [device, e] : ended) {
    if (device == failing->device) {  // replica 0's
      EXPECT_EQ(e.kind, ErrorKind::kRuntime);
      EXPECT_NE(e.message.find("failed: injected fault"), std::string::npos) << e.message;
    } else {
      EXPECT_EQ(e.kind, ErrorKind::kAborted) << "device " << device << ": " << e.message;
    }
  }
}

TEST(Execute, ANonFiniteLossStopsTheRunNamingStepAndStage) {
  // A learning rate that blows the weights up: the second step's loss is not finite.
  cost::Config c = Mlp(2, 4, "gpipe", "none");
  c.training.learning_rate = 1e30;
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  auto r = ExecuteCpu(c, *plan, {5, 10});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  // Steps count from 1, on both backends (the walker checks the step's loss).
  EXPECT_NE(r.error().message.find("step 2: the loss is"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("(stage 1)"), std::string::npos) << r.error().message;
  // And the finite loss before it, as the step ended.
  EXPECT_NE(r.error().message.find("; before it: step 1 "), std::string::npos) << r.error().message;
}

cost::Config Transformer(int stages, int micro_batches, const std::string& schedule, const std::string& recompute,
                         const std::string& optimizer = "sgd", int steps = 3) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 4, "d_model": 16, "ffn": 32, "heads": 2, "seq": 6, "vocab": 11,
               "causal": true}},
    "training": {{"batch": 8, "microbatches": {}, "optimizer": "{}", "learning_rate": 0.05, "seed": 5, "steps": {}}},
    "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "{}"}},
    "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                                        micro_batches, optimizer, steps, stages, schedule, recompute, stages),
                            "tf.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// GPipe's guarantee for a 4-block transformer: every K, M, schedule and
// recompute mode ends 3 steps with the unpartitioned run's weights.
TEST(Execute, TransformerTrainsToTheSameWeightsWhateverKAndM) {
  const ExecuteResult reference = Train(Transformer(1, 1, "gpipe", "none"), 3);
  int runs = 0;
  for (int K : {1, 2, 4}) {
    for (int M : {1, 4}) {
      for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
        for (const char* recompute : {"none", "full"}) {
          const ExecuteResult r = Train(Transformer(K, M, schedule, recompute), 3);
          EXPECT_LE(WorstDifference(r, reference), 1e-5) << "K=" << K << " M=" << M << " " << schedule << " " << recompute;
          ++runs;
        }
      }
    }
  }
  EXPECT_EQ(runs, 36);
}

TEST(Execute, TransformerLearnsItsTask) {
  const cost::Config c = Transformer(2, 4, "1f1b", "full", "adam", 40);
  cost::Config fast = c;
  fast.training.learning_rate = 0.01;
  const ExecuteResult r = Train(fast, 40);
  EXPECT_NEAR(r.losses.front(), std::log(11.0), 0.3);  // chance: ln(vocab)
  EXPECT_LT(r.losses.back(), 0.8 * r.losses.front());
}

// A Llama-class transformer (grouped-query attention, swiglu, rmsnorm,
// rotary positions, no biases), its embeddings untied or tied.
cost::Config Llama(int stages, int micro_batches, const std::string& schedule, const std::string& recompute,
                   bool tied, int replicas = 1, int batch = 8, const std::string& optimizer = "sgd",
                   double learning_rate = 0.05) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 4, "d_model": 16, "ffn": 24, "heads": 4, "kv_heads": 2, "seq": 6,
               "vocab": 11, "causal": true, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "bias": false,
               "tied_embeddings": {}}},
    "training": {{"batch": {}, "microbatches": {}, "optimizer": "{}", "learning_rate": {}, "seed": 5}},
    "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "{}"}},
    "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                                        tied, batch, micro_batches, optimizer, learning_rate, stages, schedule,
                                        recompute, stages * replicas),
                            "llama.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// GPipe's guarantee for Llama-class blocks, untied and tied: every K, M,
// schedule and recompute mode ends 3 steps with the unpartitioned run's
// losses and weights. Tied, the embedding (stage 0) and the head (the last
// stage) sum their gradients at STEP, on one device or two (zb-v puts both
// on device 0; data-parallel replicas each sum theirs after the all-reduce).
TEST(Execute, LlamaClassTrainsToTheSameWeightsWhateverKAndM) {
  int runs = 0;
  for (bool tied : {false, true}) {
    const ExecuteResult reference = Train(Llama(1, 1, "gpipe", "none", tied), 3);
    const ExecuteResult global = Train(Llama(1, 1, "gpipe", "none", tied, 1, 16), 3);
    auto check = [&](const cost::Config& c, const ExecuteResult& want, const std::string& what) {
      const ExecuteResult r = Train(c, 3);
      EXPECT_LE(WorstDifference(r, want), 1e-5) << what;
      ASSERT_EQ(r.losses.size(), want.losses.size()) << what;
      for (size_t i = 0; i < r.losses.size(); ++i) {
        EXPECT_LE(std::abs(r.losses[i] - want.losses[i]), 1e-5 * std::abs(want.losses[i])) << what << " step " << i;
      }
      ++runs;
    };
    for (int K : {1, 2, 4}) {
      for (int M : {1, 4}) {
        for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
          for (const char* recompute : {"none", "full"}) {
            check(Llama(K, M, schedule, recompute, tied),
                  reference, fmt::format("tied {} K={} M={} {} {}", tied, K, M, schedule, recompute));
          }
        }
      }
    }
    check(Llama(2, 4, "zb-v", "none", tied), reference, fmt::format("tied {} zb-v", tied));
    check(Llama(2, 4, "interleaved", "full", tied), reference, fmt::format("tied {} interleaved", tied));
    check(Llama(2, 4, "1f1b", "none", tied, /*replicas=*/2), global, fmt::format("tied {} R=2", tied));
  }
  EXPECT_EQ(runs, 2 * (36 + 3));
}

// Tied, the head's copy of the token table and the embedding's original
// take the same updates: after training on two devices they are equal, bit
// for bit, and they have moved.
TEST(Execute, TiedEmbeddingCopiesStayEqual) {
  const cost::Config c = Llama(2, 4, "1f1b", "none", /*tied=*/true, 1, 8, "adam", 0.01);
  const ExecuteResult r = Train(c, 3);
  const size_t table = 11 * 16;  // vocab x d_model: the embedding's only parameter, and the head's last
  ASSERT_GT(r.parameters.size(), 2 * table);
  const std::vector<float> original(r.parameters.begin(), r.parameters.begin() + table);
  const std::vector<float> copy(r.parameters.end() - table, r.parameters.end());
  EXPECT_EQ(original, copy);
  auto start = BuildLayers(c, 0, 0);
  EXPECT_NE(start[0]->Params().at(0)->value, original);
}

// A failure stops a device waiting at STEP for the tied embedding's other
// holder: device 1 reaches STEP first (1F1B) and waits for device 0, whose
// STEP fails; device 1 is aborted, not left to time out.
TEST(Execute, AFailureWakesADeviceWaitingForTheTiedGradient) {
  const cost::Config c = Llama(2, 4, "1f1b", "none", /*tied=*/true);
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  const ir::Op& step = plan->schedule.programs[0].back();
  ASSERT_EQ(step.kind, ir::OpKind::kStep);
  WorkerEnds ends;
  auto r = ExecuteCpu(c, *plan, ends.Recording({.steps = 1, .timeout_s = 30, .fail_op = step.id}));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("STEP failed: injected fault"), std::string::npos) << r.error().message;
  const std::map<int, Error> ended = ends.ends();
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended.at(1).kind, ErrorKind::kAborted) << ended.at(1).message;
}

// Rotary positions and a causal mask: the copy task (label t = token t) is learnt.
TEST(Execute, LlamaClassLearnsItsTask) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const ExecuteResult r = Train(Llama(2, 4, "1f1b", "full", tied, 1, 8, "adam", 0.01), 40);
    EXPECT_LT(r.losses.back(), 0.8 * r.losses.front());
  }
}

cost::Config Cnn(int stages, int micro_batches, const std::string& schedule, const std::string& recompute,
                 const std::string& optimizer = "sgd") {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "cnn", "layers": 4, "channels": 4, "image": 8, "in_channels": 2, "classes": 3,
               "reductions": 2}},
    "training": {{"batch": 8, "microbatches": {}, "optimizer": "{}", "learning_rate": 0.05, "seed": 2}},
    "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "{}"}},
    "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                                        micro_batches, optimizer, stages, schedule, recompute, stages),
                            "cnn.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// GPipe's guarantee for a small CNN with batchnorm: each micro-batch is
// normalised with its own statistics (GPipe's semantics), so the reference
// is the unpartitioned run with the same M; K, schedule and recompute (which
// must not count a micro-batch's statistics twice) change nothing.
TEST(Execute, CnnTrainsToTheSameWeightsWhateverK) {
  int runs = 0;
  for (int M : {1, 4}) {
    const ExecuteResult reference = Train(Cnn(1, M, "gpipe", "none"), 3);
    for (int K : {1, 2, 4}) {
      for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
        for (const char* recompute : {"none", "full"}) {
          const ExecuteResult r = Train(Cnn(K, M, schedule, recompute), 3);
          EXPECT_LE(WorstDifference(r, reference), 1e-5) << "K=" << K << " M=" << M << " " << schedule << " " << recompute;
          ++runs;
        }
      }
    }
  }
  EXPECT_EQ(runs, 36);
}

TEST(Execute, CnnLearnsItsTask) {
  cost::Config c = Cnn(2, 2, "1f1b", "none", "adam");
  c.training.learning_rate = 0.01;
  c.training.batch = 32;
  const ExecuteResult r = Train(c, 80);
  double last = 0;  // the last ten steps' mean: single steps of 32 samples are noisy
  for (size_t i = r.losses.size() - 10; i < r.losses.size(); ++i) last += r.losses[i] / 10;
  EXPECT_NEAR(r.losses.front(), std::log(3.0), 0.2);
  EXPECT_LT(last, 0.7 * r.losses.front());
}

TEST(Execute, AdamToo) {
  const ExecuteResult reference = Train(Mlp(1, 1, "gpipe", "none", "", "adam"), 3);
  const ExecuteResult r = Train(Mlp(4, 8, "1f1b", "full", "", "adam"), 3);
  EXPECT_LE(WorstDifference(r, reference), 1e-4);
}

TEST(Execute, LossFallsByHalfOverAHundredSteps) {
  const ExecuteResult r = Train(Mlp(4, 4, "1f1b", "full", "", "adam", 64, 64), 100);
  ASSERT_EQ(r.losses.size(), 100u);
  EXPECT_LE(r.losses.back(), r.losses.front() / 2) << r.losses.front() << " -> " << r.losses.back();
}

// The executor's measured peak per device against the simulator's prediction
// for the same plan (the oracle: the one memory model, walked by the other
// engine), above the parameters: the executor's are its trace's first memory
// sample (the step's start, when only they are held), the model's its static
// bytes (the two lay parameters out differently: the executor keeps an fp64
// gradient and an fp32 scratch per weight, the model `bytes_per_param`).
// What the executor holds that the model does not, and so the bounds:
//  - without recompute, each in-flight micro-batch's boundary input: the
//    walker keeps it until B (walker.h, Slot::input), the model frees it after
//    F, since only R reads it. Counted exactly: in-flight (the simulator's
//    peak_in_flight) x the cell's input bytes.
//  - a layer's working set: its input and output while it runs (a layer
//    returns its output and saves a copy of what backward reads), the output
//    awaiting its SEND, the gradient being made, and the small input and
//    loss tensors: measured 2 to 3.6 micro-batch activations (micro-batch rows
//    x width x 4 bytes) whatever M and in-flight count; bounded by 4.
// Layer norm would add its 1/std per row (4 bytes per row per block), which
// the model leaves out: the model here has no norm.
TEST(Execute, MeasuredPeakMemoryFollowsRecomputeAndSchedule) {
  constexpr int kBatch = 64, kWidth = 64, kInput = 12;  // Mlp's input columns
  for (const char* schedule : {"gpipe", "1f1b"}) {
    for (const char* recompute : {"none", "full"}) {
      for (int M : {4, 8}) {
        SCOPED_TRACE(fmt::format("{} recompute {} M={}", schedule, recompute, M));
        const cost::Config c = Mlp(2, M, schedule, recompute, R"(, "norm": "none")", "sgd", kBatch, kWidth);
        auto plan = partition::PlanFromConfig(c);
        ASSERT_TRUE(plan) << plan.error().message;
        auto r = ExecuteCpu(c, *plan, {2, 10});
        ASSERT_TRUE(r) << r.error().message;
        const cost::PlanCosts costs = cost::CostsFromPlan(c, *plan);
        auto sim = simulate::Simulate(plan->schedule, costs);
        ASSERT_TRUE(sim) << sim.error().message;
        const double rows = kBatch / M, activation = rows * kWidth * 4;
        for (int d = 0; d < plan->schedule.num_devices; ++d) {
          ASSERT_EQ(plan->schedule.placement[d], d);  // one stage per device
          const double executor = r->peak_memory_bytes[d] - r->trace.memory[d].front().bytes;
          const double model = sim->devices[d].peak_memory_bytes - costs.static_bytes[d];
          const double kept = std::string(recompute) == "none"
                                  ? sim->peak_in_flight[d] * rows * (d == 0 ? kInput : kWidth) * 4 : 0.0;
          EXPECT_GE(executor, model + kept) << "device " << d;
          EXPECT_LE(executor, model + kept + 4 * activation) << "device " << d;
        }
      }
    }
  }
}

// Batchnorm's running statistics are folded once per mini-batch from all
// its rows, so they are the same whatever K, schedule and recompute (a
// recompute must not count its rows twice), as the weights are; and they have
// moved from their start (mean 0, variance 1). Each micro-batch is
// normalised with its own statistics (GPipe's semantics), so the reference
// is the unpartitioned run with the same M.
TEST(Execute, BatchNormRunningStatisticsDoNotDependOnKOrRecompute) {
  const char* norm = R"(, "norm": "batchnorm")";
  for (int M : {1, 4}) {
    const ExecuteResult reference = Train(Mlp(1, M, "gpipe", "none", norm), 3);
    ASSERT_EQ(reference.state.size(), 6u * 2 * 16);  // the 6 hidden blocks' batchnorms of 16: mean, variance
    double moved = 0;
    for (size_t i = 0; i < reference.state.size(); ++i) {
      moved = std::max(moved, std::abs(reference.state[i] - ((i / 16) % 2 == 0 ? 0.0 : 1.0)));
    }
    EXPECT_GT(moved, 0.01);
    for (int K : {1, 2, 4}) {
      for (const char* schedule : {"gpipe", "1f1b"}) {
        for (const char* recompute : {"none", "full"}) {
          const ExecuteResult r = Train(Mlp(K, M, schedule, recompute, norm), 3);
          EXPECT_TRUE(std::isfinite(r.losses.back()));
          EXPECT_LE(WorstDifference(r, reference), 1e-5)
              << "K=" << K << " M=" << M << " " << schedule << " " << recompute;
        }
      }
    }
  }
}

// Device 0 never sends its activation: device 1 waits for it, and device 0
// for a gradient that cannot come. Whichever receive's deadline passes first
// ends the run saying it timed out, naming the op; the other device times
// out too or is stopped by that failure. Nothing else ends the run.
TEST(Execute, APeerThatNeverSendsTimesOutNamingTheOp) {
  const cost::Config c = Mlp(2, 1, "gpipe", "none");
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  auto& program = plan->schedule.programs[0];
  program.erase(std::find_if(program.begin(), program.end(),
                             [](const ir::Op& op) { return op.kind == ir::OpKind::kSendF; }));
  ir::Renumber(plan->schedule);
  WorkerEnds ends;
  auto r = ExecuteCpu(c, *plan, ends.Recording({1, 0.3}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  // device: (its receive's token, the peer it waits for)
  const std::map<int, std::pair<std::string, int>> waits{{0, {"device 0: 0RECV_B0", 1}},
                                                         {1, {"device 1: 1RECV_F0", 0}}};
  auto timed_out = [&](int device, const std::string& message) {
    const auto& [op, peer] = waits.at(device);
    const std::string timeout = fmt::format(" timed out after 0.3 s waiting to receive from device {}", peer);
    return message.rfind(op, 0) == 0 && message.find(timeout) != std::string::npos;
  };
  EXPECT_TRUE(timed_out(0, r.error().message) || timed_out(1, r.error().message)) << r.error().message;
  const std::map<int, Error> ended = ends.ends();
  ASSERT_EQ(ended.size(), 2u);
  int timeouts = 0;
  for (const auto& [device, e] : ended) {
    if (e.kind == ErrorKind::kAborted) continue;
    EXPECT_EQ(e.kind, ErrorKind::kRuntime);
    EXPECT_TRUE(timed_out(device, e.message)) << e.message;
    ++timeouts;
  }
  EXPECT_GE(timeouts, 1);
}

TEST(Execute, TraceHasEveryOpInTheSimulatorsFormat) {
  const cost::Config c = Mlp(3, 4, "1f1b", "full");
  const ExecuteResult r = Train(c, 2);
  auto plan = partition::PlanFromConfig(c);
  ASSERT_EQ(r.trace.events.size(), static_cast<size_t>(plan->schedule.NumOps()));
  for (size_t i = 0; i < r.trace.events.size(); ++i) {
    EXPECT_EQ(r.trace.events[i].id, static_cast<int32_t>(i));
    EXPECT_LE(r.trace.events[i].start_s, r.trace.events[i].end_s);
  }
  auto back = traces::ReadTraceJson(traces::WriteTraceJson(r.trace), "t.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->events.size(), r.trace.events.size());
  ASSERT_EQ(r.trace.memory.size(), 3u);
  EXPECT_GT(r.trace.memory[0].size(), 4u);
}

}  // namespace
}  // namespace twinpipe::execute

namespace twinpipe::execute {
namespace {

// The overhead is of the kept (lower-median) step: its time less the
// busiest stream's summed op time.
TEST(Execute, ExecutorOverheadIsOfTheMedianStep) {
  ExecuteResult r;
  r.step_time_s = {0.040, 0.010, 0.020, 0.030};  // lower median: 0.020 (step 3)
  EXPECT_EQ(MedianStep(r.step_time_s), 2u);
  using traces::Event;
  using traces::Stream;
  r.trace.events = {Event{0, 0, Stream::kCompute, ir::OpKind::kForward, 0, 0, -1, 0.000, 0.006, 0},
                    Event{1, 0, Stream::kCompute, ir::OpKind::kBackward, 0, 0, -1, 0.008, 0.016, 0},
                    Event{2, 1, Stream::kCompute, ir::OpKind::kForward, 1, 0, -1, 0.006, 0.015, 0},
                    Event{3, 0, Stream::kSend, ir::OpKind::kSendF, 0, 0, 1, 0.006, 0.006, 0}};
  EXPECT_NEAR(ExecutorOverhead(r), (0.020 - 0.014) / 0.020, 1e-12);  // device 0's compute: 14 ms
}

}  // namespace
// The names the README documents (twinpipe execute --transport
// auto|nccl|p2p|host-staged|local, --precision fp32|tf32|bf16; the config's
// training.optimizer adam, sgd), written here as the contract: each parses
// to its value and writes back as itself, the tables hold no undocumented
// name, and other names are not options.
TEST(ExecuteOptions, DocumentedNamesParseToTheirValues) {
  const std::vector<std::pair<std::string, TransportKind>> transports{
      {"auto", TransportKind::kAuto}, {"nccl", TransportKind::kNccl}, {"p2p", TransportKind::kP2p},
      {"host-staged", TransportKind::kHostStaged}, {"local", TransportKind::kLocal}};
  for (const auto& [name, value] : transports) {
    EXPECT_EQ(TransportFromName(name), value) << name;
    EXPECT_EQ(TransportName(value), name);
  }
  EXPECT_EQ(kTransportNames.size(), transports.size());
  const std::vector<std::pair<std::string, Precision>> precisions{
      {"fp32", Precision::kFp32}, {"tf32", Precision::kTf32}, {"bf16", Precision::kBf16}};
  for (const auto& [name, value] : precisions) {
    EXPECT_EQ(PrecisionFromName(name), value) << name;
    EXPECT_EQ(PrecisionName(value), name);
  }
  EXPECT_EQ(kPrecisionNames.size(), precisions.size());
  const std::vector<std::pair<std::string, OptimizerKind>> optimizers{{"adam", OptimizerKind::kAdam},
                                                                      {"sgd", OptimizerKind::kSgd}};
  for (const auto& [name, value] : optimizers) {
    EXPECT_EQ(OptimizerFromName(name), value) << name;
    EXPECT_EQ(OptimizerName(value), name);
  }
  EXPECT_EQ(kOptimizerNames.size(), optimizers.size());
  for (const char* unknown : {"carrier-pigeon", "Auto", "host_staged", ""}) EXPECT_FALSE(TransportFromName(unknown));
  for (const char* unknown : {"fp8", "FP32", "fp16"}) EXPECT_FALSE(PrecisionFromName(unknown));
  for (const char* unknown : {"lamb", "Adam", "adamw"}) EXPECT_FALSE(OptimizerFromName(unknown));
}

// The optimizer is parsed once where the executor starts: a name the config
// loader would refuse, set on a loaded config, is bad input naming its path.
TEST(ExecuteOptions, AnUnknownOptimizerIsBadInputNamingItsPath) {
  cost::Config c = Mlp(2, 2, "gpipe", "none");
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan) << plan.error().message;
  c.training.optimizer = "lamb";
  auto r = ExecuteCpu(c, *plan, {1, 10});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  EXPECT_EQ(r.error().message, "t.json: /training/optimizer: 'lamb' is not one of adam, sgd");
}

}  // namespace twinpipe::execute
