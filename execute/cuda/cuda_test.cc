// The CUDA backend against its reference, the CPU backend: each layer's
// forward and backward (and I/W split), then whole training runs over
// schedules, stage counts and transports. Every test skips, saying why, when
// no GPU is present (CI, and the development machines).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "execute/cuda/check.h"
#include "execute/cuda/from_cpu.h"
#include "execute/cuda/layers/softmax_cross_entropy.h"
#include "execute/cuda/optimizer.h"
#include "execute/layers/attention.h"
#include "execute/layers/batchnorm.h"
#include "execute/layers/batchnorm2d.h"
#include "execute/layers/conv2d.h"
#include "execute/layers/conv_block.h"
#include "execute/layers/embedding.h"
#include "execute/layers/pooling.h"
#include "execute/layers/transformer_block.h"
#include "execute/layers/gelu.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/linear.h"
#include "execute/layers/random_tensor.h"
#include "execute/layers/relu.h"
#include "execute/layers/residual_block.h"
#include "execute/layers/rmsnorm.h"
#include "execute/layers/softmax_cross_entropy.h"
#include "execute/layers/squared_relu.h"
#include "execute/layers/swiglu.h"
#include "execute/runtime.h"
#include "partition/pipeline_plan.h"

namespace twinpipe::execute::cuda {
namespace {

int Gpus() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

#define REQUIRE_GPU(n)                                                                                  \
  if (Gpus() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << Gpus() \
                                 << ": the CUDA backend is checked against the CPU backend on a GPU machine"

std::vector<float> Download(const DeviceTensor& t) {
  std::vector<float> h(static_cast<size_t>(t.size()));
  TP_CUDA(cudaDeviceSynchronize());
  TP_CUDA(cudaMemcpy(h.data(), t.data(), h.size() * 4, cudaMemcpyDeviceToHost));
  return h;
}

std::vector<float> Download(const DeviceBuffer& b) {
  std::vector<float> h(static_cast<size_t>(b.size()));
  TP_CUDA(cudaDeviceSynchronize());
  TP_CUDA(cudaMemcpy(h.data(), b.get(), h.size() * 4, cudaMemcpyDeviceToHost));
  return h;
}

DeviceTensor UploadTensor(const Context& ctx, const Tensor& t) {
  DeviceTensor d = ctx.Alloc(t.rows(), t.cols());
  TP_CUDA(cudaMemcpy(d.data(), t.data(), static_cast<size_t>(t.bytes()), cudaMemcpyHostToDevice));
  return d;
}

constexpr auto Random = RandomNormal;

template <typename A, typename B>
void ExpectClose(const A& gpu, const B& cpu, size_t n, double tol, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(double(gpu[i]) - double(cpu[i])) / std::max(1.0, std::abs(double(cpu[i]))));
  }
  EXPECT_LE(worst, tol) << what;
}

struct Gpu {
  cudaStream_t stream = nullptr;
  std::unique_ptr<Blas> blas;
  MemoryAccount account;
  Gpu() {
    TP_CUDA(cudaSetDevice(0));
    TP_CUDA(cudaStreamCreate(&stream));
    blas = std::make_unique<Blas>();
  }
  ~Gpu() {
    blas.reset();
    cudaStreamDestroy(stream);
  }
  Context Ctx(Precision p = Precision::kFp32) { return Context{stream, blas.get(), &account, p}; }
};

// Forward, Backward, and I then W of the CUDA twin against the CPU layer.
// `input`: the layer's input when random normal values will not do (token ids).
void CheckLayer(execute::Layer& cpu, int rows, int in, int out, double tol = 1e-4, const Tensor* input = nullptr,
                int out_rows = -1, Precision precision = Precision::kFp32) {
  Gpu gpu;
  const Context ctx = gpu.Ctx(precision);
  auto twin = FromCpu(cpu);
  ASSERT_TRUE(twin) << twin.error().message;
  MemoryAccount account;
  const Tensor x = input ? *input : Random(&account, rows, in, 1);
  const Tensor dy = Random(&account, out_rows < 0 ? rows : out_rows, out, 2);
  for (bool split : {false, true}) {
    SCOPED_TRACE(fmt::format("{} {}", cpu.Name(), split ? "I then W" : "Backward"));
    execute::Saved cs;
    const Tensor y = cpu.Forward(x, cs, Mode::kRecompute);
    for (Param* p : cpu.Params()) std::fill(p->grad.begin(), p->grad.end(), 0.0);
    Tensor dx = split ? cpu.BackwardInput(dy, cs) : cpu.Backward(dy, cs);
    if (split) cpu.BackwardWeight(cs);

    for (DeviceParam* p : (*twin)->Params()) TP_CUDA(cudaMemset(p->grad.get(), 0, p->grad.size() * 4));
    Saved gs;
    const DeviceTensor gy = (*twin)->Forward(ctx, UploadTensor(ctx, x), gs, Mode::kRecompute);
    const DeviceTensor gdy = UploadTensor(ctx, dy);
    DeviceTensor gdx = split ? (*twin)->BackwardInput(ctx, gdy, gs) : (*twin)->Backward(ctx, gdy, gs);
    if (split) (*twin)->BackwardWeight(ctx, gs);

    ExpectClose(Download(gy), y.data(), static_cast<size_t>(y.rows()) * y.cols(), tol, "forward");
    ExpectClose(Download(gdx), dx.data(), static_cast<size_t>(dx.rows()) * dx.cols(), tol, "input gradient");
    const auto cp = cpu.Params();
    const auto gp = (*twin)->Params();
    ASSERT_EQ(cp.size(), gp.size());
    for (size_t i = 0; i < cp.size(); ++i) {
      ExpectClose(Download(gp[i]->grad), cp[i]->grad, cp[i]->grad.size(), tol, cp[i]->name + " gradient");
    }
  }
}

TEST(CudaLayers, LinearMatchesCpu) {
  REQUIRE_GPU(1);
  execute::Linear l(7, 33, 17);
  CheckLayer(l, 9, 33, 17);
}

TEST(CudaLayers, ActivationsMatchCpu) {
  REQUIRE_GPU(1);
  execute::Relu relu;
  CheckLayer(relu, 5, 40, 40);
  execute::Gelu gelu;
  CheckLayer(gelu, 5, 40, 40);
}

TEST(CudaLayers, LlamaActivationsMatchCpu) {
  REQUIRE_GPU(1);
  execute::SquaredRelu squared;
  CheckLayer(squared, 5, 40, 40);
  execute::Swiglu swiglu;
  CheckLayer(swiglu, 5, 2 * 40, 40);
  execute::Linear no_bias(7, 33, 17, /*bias=*/false);
  CheckLayer(no_bias, 9, 33, 17);
}

TEST(CudaLayers, NormsMatchCpu) {
  REQUIRE_GPU(1);
  execute::LayerNorm ln(300);  // more features than a block has threads
  CheckLayer(ln, 6, 300, 300);
  execute::BatchNorm bn(24);
  CheckLayer(bn, 11, 24, 24);
  execute::RmsNorm rms(300);
  CheckLayer(rms, 6, 300, 300);
}

TEST(CudaLayers, BlocksMatchCpu) {
  REQUIRE_GPU(1);
  for (cost::Norm norm : {cost::Norm::kNone, cost::Norm::kLayerNorm, cost::Norm::kBatchNorm}) {
    for (bool residual : {false, true}) {
      execute::ResidualBlock block(5, 32, norm, residual);
      CheckLayer(block, 8, 32, 32);
    }
  }
}

TEST(CudaLayers, EmbeddingMatchesCpu) {
  REQUIRE_GPU(1);
  execute::Embedding e(3, 50, 6, 16);
  MemoryAccount account;
  Tensor ids(&account, 4, 6);
  for (int i = 0; i < 24; ++i) ids.data()[i] = static_cast<float>((i * 7) % 50);
  CheckLayer(e, 4, 6, 16, 1e-5, &ids, 24);
  execute::Embedding tokens_only(3, 50, 6, 16, /*positions=*/false);
  CheckLayer(tokens_only, 4, 6, 16, 1e-5, &ids, 24);
}

TEST(CudaLayers, AttentionMatchesCpu) {
  REQUIRE_GPU(1);
  for (bool causal : {false, true}) {
    execute::SelfAttention a(5, 32, 4, 8, causal);
    CheckLayer(a, 3 * 8, 32, 32);
  }
}

TEST(CudaLayers, GroupedQueryAttentionWithRotaryPositionsMatchesCpu) {
  REQUIRE_GPU(1);
  for (int kv_heads : {4, 2, 1}) {
    for (bool rope : {false, true}) {
      execute::SelfAttention a(5, {.d = 32, .heads = 4, .kv_heads = kv_heads, .seq = 8, .causal = true, .rope = rope,
                                   .bias = kv_heads != 2});
      CheckLayer(a, 3 * 8, 32, 32);
    }
  }
}

TEST(CudaLayers, TransformerBlockMatchesCpu) {
  REQUIRE_GPU(1);
  execute::TransformerBlock b(6, 32, 64, 4, 8, true);
  CheckLayer(b, 2 * 8, 32, 32);
  for (auto mlp : {cost::MlpKind::kSwiglu, cost::MlpKind::kSquaredRelu}) {
    const cost::TransformerSpec llama{.d_model = 32, .ffn = 48, .heads = 4, .seq = 8, .causal = true, .kv_heads = 2,
                                      .mlp = mlp, .norm = cost::NormKind::kRmsNorm,
                                      .position = cost::PositionKind::kRope, .bias = false};
    execute::TransformerBlock l(7, llama);
    CheckLayer(l, 2 * 8, 32, 32);
  }
}

TEST(CudaLayers, ConvolutionLayersMatchCpu) {
  REQUIRE_GPU(1);
  for (int stride : {1, 2}) {
    execute::Conv2d conv(7, 3, 5, 9, stride);
    CheckLayer(conv, 2, 3 * 81, 5 * conv.out_image() * conv.out_image());
  }
  execute::BatchNorm2d bn(4, 25);
  CheckLayer(bn, 3, 100, 100);
  execute::GlobalAvgPool pool(4, 25);
  CheckLayer(pool, 3, 100, 4);
  auto block = execute::MakeConvBlock(8, 4, 4, 6, 1);  // residual
  CheckLayer(*block, 2, 4 * 36, 4 * 36);
}

TEST(CudaLayers, Tf32AndBf16GemmsStayNearFp32) {
  REQUIRE_GPU(1);
  Gpu gpu;
  MemoryAccount account;
  execute::Linear cpu(3, 512, 256);
  const Tensor x = Random(&account, 64, 512, 4);
  execute::Saved cs;
  const Tensor y = cpu.Forward(x, cs, Mode::kEval);
  for (auto [precision, tol] : {std::pair{Precision::kTf32, 5e-3}, std::pair{Precision::kBf16, 3e-2}}) {
    auto twin = FromCpu(cpu);
    ASSERT_TRUE(twin);
    const Context ctx = gpu.Ctx(precision);
    Saved gs;
    ExpectClose(Download((*twin)->Forward(ctx, UploadTensor(ctx, x), gs, Mode::kEval)), y.data(),
                static_cast<size_t>(y.rows()) * y.cols(), tol, "reduced-precision forward");
  }
}

// Linear's BF16 path against the fp32 CPU layer, to BF16's tolerance:
// forward, Backward (dy converted once for both products) and I then W (dy
// converted in each), with the input saved in bf16 and the weight read
// through its bf16 copy.
TEST(CudaLayers, Bf16LinearMatchesCpu) {
  REQUIRE_GPU(1);
  execute::Linear l(7, 33, 17);
  CheckLayer(l, 9, 33, 17, 3e-2, nullptr, -1, Precision::kBf16);
  execute::Linear no_bias(7, 33, 17, /*bias=*/false);
  CheckLayer(no_bias, 9, 33, 17, 3e-2, nullptr, -1, Precision::kBf16);
}

// In BF16 a Linear reads its weight's bf16 copy, made once per optimizer
// step: after an SGD step has changed the weight, the forward follows the
// new weight (the CPU layer's forward at the GPU's updated values, to BF16's
// tolerance), where a stale copy would still give the old output, which the
// step moved far past that tolerance. The saved input counts 2 bytes an
// element.
TEST(CudaLayers, Bf16WeightCopyFollowsOptimizerSteps) {
  REQUIRE_GPU(1);
  Gpu gpu;
  const Context ctx = gpu.Ctx(Precision::kBf16);
  MemoryAccount account;
  execute::Linear cpu(3, 512, 256);
  const Tensor x = Random(&account, 64, 512, 4), dy = Random(&account, 64, 256, 5);
  auto twin = FromCpu(cpu);
  ASSERT_TRUE(twin) << twin.error().message;
  const std::vector<DeviceParam*> gp = (*twin)->Params();  // weight, bias
  const DeviceTensor gx = UploadTensor(ctx, x);

  const int64_t before = gpu.account.bytes();
  Saved gs;
  const DeviceTensor gy = (*twin)->Forward(ctx, gx, gs, Mode::kTrain);
  EXPECT_EQ(gpu.account.bytes() - before, gy.bytes() + int64_t{64} * 512 * 2) << "y in fp32, the saved x in bf16";
  const std::vector<float> y_before = Download(gy);
  (*twin)->Backward(ctx, UploadTensor(ctx, dy), gs);
  // lr 0.003: the weights move by about their own size (dW over 64 rows is
  // ~8 an element, W ~0.025), the outputs by ~1.5, while BF16's rounding of
  // the new weights stays ~0.003 an output (4x that at worst, well inside 3e-2).
  for (DeviceParam* p : gp) Apply(ctx, OptimizerKind::kSgd, /*lr=*/0.003, /*momentum=*/0, /*step=*/1, *p);
  EXPECT_EQ(gp[0]->version, 1u);
  Saved again;
  const std::vector<float> y_after = Download((*twin)->Forward(ctx, gx, again, Mode::kEval));

  const std::vector<Param*> cp = cpu.Params();
  ASSERT_EQ(cp.size(), gp.size());
  for (size_t i = 0; i < cp.size(); ++i) cp[i]->value = Download(gp[i]->value);
  execute::Saved cs;
  const Tensor want = cpu.Forward(x, cs, Mode::kEval);
  const size_t n = static_cast<size_t>(want.rows()) * want.cols();
  ExpectClose(y_after, want.data(), n, 3e-2, "BF16 forward after an SGD step");
  double moved = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = want.data()[i];
    moved = std::max(moved, std::abs(double(y_before[i]) - w) / std::max(1.0, std::abs(w)));
  }
  EXPECT_GT(moved, 0.3) << "the step should move the output well past the tolerance";
}

TEST(CudaLayers, SoftmaxCrossEntropyMatchesCpu) {
  REQUIRE_GPU(1);
  Gpu gpu;
  const Context ctx = gpu.Ctx();
  MemoryAccount account;
  const Tensor logits = Random(&account, 13, 300, 5);
  std::vector<int> labels(13);
  for (int i = 0; i < 13; ++i) labels[i] = (i * 37) % 300;
  double loss = 0;
  const Tensor grad = execute::SoftmaxCrossEntropy(logits, labels, 26.0, loss);
  int* dl = nullptr;
  double* dloss = nullptr;
  TP_CUDA(cudaMalloc(&dl, labels.size() * sizeof(int)));
  TP_CUDA(cudaMalloc(&dloss, sizeof(double)));
  TP_CUDA(cudaMemcpy(dl, labels.data(), labels.size() * sizeof(int), cudaMemcpyHostToDevice));
  TP_CUDA(cudaMemset(dloss, 0, sizeof(double)));
  const DeviceTensor g = SoftmaxCrossEntropy(ctx, UploadTensor(ctx, logits), dl, 26.0, dloss);
  ExpectClose(Download(g), grad.data(), static_cast<size_t>(grad.rows()) * grad.cols(), 1e-5, "logits gradient");
  double gpu_loss = 0;
  TP_CUDA(cudaMemcpy(&gpu_loss, dloss, sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(gpu_loss, loss, 1e-6 * std::abs(loss));
  cudaFree(dl);
  cudaFree(dloss);
}

cost::Config Mlp(int stages, int micro_batches, const std::string& schedule, const std::string& norm,
                 int replicas = 1) {
  const std::string text = fmt::format(R"({{
    "model": {{"generator": "mlp", "layers": 8, "width": 64, "input": 24, "classes": 10, "norm": "{}",
               "residual": true}},
    "training": {{"batch": 32, "microbatches": {}, "optimizer": "adam", "learning_rate": 0.01, "seed": 3}},
    "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "full"}},
    "cluster": {{"device": "H100-SXM", "devices": {}, "link": "nvlink4"}}}})",
                                       norm, micro_batches, stages, schedule, stages * replicas);
  auto c = cost::LoadConfig(text, "t.json");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

// GPipe's guarantee across backends: 3 steps on the GPU end with the CPU
// backend's parameters (fp32, to 1e-4 relative), under GPipe, 1F1B, ZB-H1
// and interleaved 1F1B (2 chunks per device), for K stages on one GPU
// joined by the local and the host-staged transports (and by p2p and NCCL
// where there are GPUs enough).
TEST(CudaExecute, ThreeStepsMatchCpuAcrossStagesAndTransports) {
  REQUIRE_GPU(1);
  for (int K : {1, 2, 4}) {
    for (const char* schedule : {"gpipe", "1f1b", "zb-h1", "interleaved"}) {
      if (K == 1 && std::string_view(schedule) == "interleaved") continue;  // needs two devices or more
      const cost::Config c = Mlp(K, 4, schedule, K == 2 ? "batchnorm" : "layernorm");
      auto plan = partition::PlanFromConfig(c);
      ASSERT_TRUE(plan) << plan.error().message;
      auto cpu = ExecuteCpu(c, *plan, {.steps = 3});
      ASSERT_TRUE(cpu) << cpu.error().message;
      std::vector<TransportKind> transports = {TransportKind::kLocal, TransportKind::kHostStaged};
      if (Gpus() >= K && K > 1) transports = {TransportKind::kHostStaged, TransportKind::kP2p, TransportKind::kNccl};
      for (const TransportKind transport : transports) {
        SCOPED_TRACE(fmt::format("K={} {} {}", K, schedule, TransportName(transport)));
        auto gpu = ExecuteCuda(c, *plan, {.steps = 3, .transport = transport});
        ASSERT_TRUE(gpu) << gpu.error().message;
        ExpectClose(gpu->parameters, cpu->parameters, cpu->parameters.size(), 1e-4, "parameters after 3 steps");
        for (int s = 0; s < 3; ++s) EXPECT_NEAR(gpu->losses[s], cpu->losses[s], 1e-4 * std::abs(cpu->losses[s]));
        // Accounting never claims more than the allocator really held (the
        // parameters, outside the pool, fit in the 2 MiB of slack).
        for (size_t d = 0; d < gpu->peak_memory_bytes.size(); ++d) {
          EXPECT_GT(gpu->peak_memory_bytes[d], 0);
          if (transport != TransportKind::kLocal) {
            EXPECT_LE(gpu->peak_memory_bytes[d], gpu->allocator_peak_bytes[d] + (1 << 21));
          }
          EXPECT_LE(gpu->allocator_peak_bytes[d], gpu->device_used_bytes[d]);
        }
        EXPECT_EQ(gpu->trace.events.size(), static_cast<size_t>(plan->schedule.NumOps()));
      }
    }
  }
}

// Issue 11's guarantee on the GPU: a 4-block transformer and a small CNN,
// K in {1, 2, 4}, M in {1, 4}: 3 steps end with the CPU backend's parameters
// under SGD with momentum. Under Adam the losses agree, but not every
// parameter can: some have a gradient that is zero in exact arithmetic (the
// key projection's bias, as softmax ignores a shift shared by a row of
// scores; a convolution's bias ahead of batch norm), so each backend's
// rounding noise there is all Adam sees, and it scales noise to a full step.
// Those parameters change no output, so the losses still hold to 1e-4.
// The CNN's batch norm sees micro-batches of 4 samples or more: over 2 (batch
// 8 in 4 micro-batches) the H100 ended 3 SGD steps 1.5e-3 from the CPU, the
// losses 1.4e-4 apart, while 8 samples agreed to 1e-4.
TEST(CudaExecute, TransformerAndCnnMatchCpu) {
  REQUIRE_GPU(1);
  const std::pair<const char*, int> models[] = {  // the model, and its batch
      {R"("generator": "transformer", "layers": 4, "d_model": 32, "ffn": 64, "heads": 4, "seq": 8, "vocab": 20,
          "causal": true)", 8},
      {R"("generator": "cnn", "layers": 5, "channels": 4, "image": 8, "in_channels": 3, "classes": 5)", 16}};
  for (const auto& [model, batch] : models) {
    for (const char* optimizer : {"sgd", "adam"}) {
      for (int K : {1, 2, 4}) {
        for (int M : {1, 4}) {
          SCOPED_TRACE(fmt::format("{} {} K={} M={}", model, optimizer, K, M));
          auto c = cost::LoadConfig(fmt::format(R"({{"model": {{{}}},
            "training": {{"batch": {}, "microbatches": {}, "optimizer": "{}", "learning_rate": 0.01, "seed": 2}},
            "pipeline": {{"stages": {}, "schedule": "1f1b", "recompute": "full"}},
            "cluster": {{"device": "H100-SXM", "devices": {}, "link": "nvlink4"}}}})", model, batch, M, optimizer, K,
                                                K),
                                        "t.json");
          ASSERT_TRUE(c) << c.error().message;
          auto plan = partition::PlanFromConfig(*c);
          ASSERT_TRUE(plan) << plan.error().message;
          auto cpu = ExecuteCpu(*c, *plan, {.steps = 3});
          ASSERT_TRUE(cpu) << cpu.error().message;
          auto gpu = ExecuteCuda(*c, *plan, {.steps = 3});
          ASSERT_TRUE(gpu) << gpu.error().message;
          for (int s = 0; s < 3; ++s) EXPECT_NEAR(gpu->losses[s], cpu->losses[s], 1e-4 * std::abs(cpu->losses[s]));
          // The CNN's batchnorm running statistics, folded on the GPU.
          ASSERT_EQ(gpu->state.size(), cpu->state.size());
          ExpectClose(gpu->state, cpu->state, cpu->state.size(), 1e-4, "running statistics after 3 steps");
          if (std::string(optimizer) == "sgd") {
            ExpectClose(gpu->parameters, cpu->parameters, cpu->parameters.size(), 1e-4, "parameters after 3 steps");
          }
        }
      }
    }
  }
}

// Llama-class blocks (grouped-query attention, rotary positions, swiglu,
// rmsnorm, no biases), untied and tied, on the GPU end 3 SGD steps with the
// CPU backend's losses and parameters: tied on one device (K = 1, and zb-v,
// which puts the first and the last stage on device 0) sums the two
// gradients on the GPU, on two devices through the host.
TEST(CudaExecute, LlamaClassMatchesCpu) {
  REQUIRE_GPU(1);
  for (const char* tied : {"false", "true"}) {
    for (auto [K, schedule] :
         {std::pair{1, "1f1b"}, std::pair{2, "1f1b"}, std::pair{4, "zb-h1"}, std::pair{2, "zb-v"}}) {
      SCOPED_TRACE(fmt::format("tied {} K={} {}", tied, K, schedule));
      auto c = cost::LoadConfig(fmt::format(R"({{"model": {{"generator": "transformer", "layers": 4, "d_model": 32,
          "ffn": 48, "heads": 4, "kv_heads": 2, "seq": 8, "vocab": 20, "causal": true, "mlp": "swiglu",
          "norm": "rmsnorm", "position": "rope", "bias": false, "tied_embeddings": {}}},
        "training": {{"batch": 8, "microbatches": 4, "optimizer": "sgd", "learning_rate": 0.01, "seed": 2}},
        "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "full"}},
        "cluster": {{"device": "H100-SXM", "devices": {}, "link": "nvlink4"}}}})", tied, K, schedule, K),
                                    "llama.json");
      ASSERT_TRUE(c) << c.error().message;
      auto plan = partition::PlanFromConfig(*c);
      ASSERT_TRUE(plan) << plan.error().message;
      auto cpu = ExecuteCpu(*c, *plan, {.steps = 3});
      ASSERT_TRUE(cpu) << cpu.error().message;
      auto gpu = ExecuteCuda(*c, *plan, {.steps = 3});
      ASSERT_TRUE(gpu) << gpu.error().message;
      for (int s = 0; s < 3; ++s) EXPECT_NEAR(gpu->losses[s], cpu->losses[s], 1e-4 * std::abs(cpu->losses[s]));
      ExpectClose(gpu->parameters, cpu->parameters, cpu->parameters.size(), 1e-4, "parameters after 3 steps");
    }
  }
}

TEST(CudaExecute, AFailingOpIsNamed) {
  REQUIRE_GPU(1);
  const cost::Config c = Mlp(2, 4, "1f1b", "layernorm");
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  const ir::Op& victim = plan->schedule.programs[1][3];
  auto r = ExecuteCuda(c, *plan, {.steps = 1, .timeout_s = 5, .fail_op = victim.id, .transport = TransportKind::kLocal});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(r.error().message.find(ir::OpToken(victim)), std::string::npos) << r.error().message;
}

// Data-parallel replicas on the GPU: NCCL averages the gradients, and the
// run ends with the CPU backend's parameters (which equal the unpartitioned
// run's on the global batch). In one process each replica needs a GPU.
TEST(CudaExecute, ReplicasMatchCpu) {
  REQUIRE_GPU(2);
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const cost::Config c = Mlp(1, 4, schedule, "layernorm", 2);
    auto plan = partition::PlanFromConfig(c);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->schedule.replicas, 2);
    auto cpu = ExecuteCpu(c, *plan, {.steps = 3});
    ASSERT_TRUE(cpu) << cpu.error().message;
    auto gpu = ExecuteCuda(c, *plan, {.steps = 3});
    ASSERT_TRUE(gpu) << gpu.error().message;
    ExpectClose(gpu->parameters, cpu->parameters, cpu->parameters.size(), 1e-4, schedule);
    EXPECT_EQ(gpu->peak_memory_bytes.size(), 2u);
  }
}

TEST(CudaExecute, ReplicasSharingAGpuAreRefused) {
  REQUIRE_GPU(1);
  if (Gpus() >= 2) GTEST_SKIP() << "two GPUs: the replicas have one each";
  const cost::Config c = Mlp(1, 4, "gpipe", "layernorm", 2);
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  auto r = ExecuteCuda(c, *plan, {.steps = 1});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(r.error().message.find("needs a GPU per replica"), std::string::npos) << r.error().message;
}

// A transport that cannot join two devices is refused, naming them: local
// between two GPUs, nccl within one.
TEST(CudaExecute, RefusesWhatItCannotRun) {
  REQUIRE_GPU(1);
  const cost::Config c = Mlp(2, 4, "gpipe", "layernorm");
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  auto r = ExecuteCuda(c, *plan, {.steps = 1, .transport = Gpus() >= 2 ? TransportKind::kLocal : TransportKind::kNccl});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(r.error().message.find("devices 0 and 1"), std::string::npos) << r.error().message;
}

// Without a GPU the backend says so: a runtime error, not a crash.
TEST(CudaExecute, WithoutAGpuSaysSo) {
  if (Gpus() > 0) GTEST_SKIP() << "a GPU is present";
  const cost::Config c = Mlp(1, 2, "gpipe", "layernorm");
  auto plan = partition::PlanFromConfig(c);
  ASSERT_TRUE(plan);
  auto r = ExecuteCuda(c, *plan, {.steps = 1});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(r.error().message.find("no CUDA device"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace twinpipe::execute::cuda
