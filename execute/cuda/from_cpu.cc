#include "execute/cuda/from_cpu.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "execute/cuda/check.h"
#include "execute/cuda/layers/activations.h"
#include "execute/cuda/layers/attention.h"
#include "execute/cuda/layers/batchnorm2d.h"
#include "execute/cuda/layers/conv2d.h"
#include "execute/cuda/layers/embedding.h"
#include "execute/cuda/layers/pooling.h"
#include "execute/cuda/layers/batchnorm.h"
#include "execute/cuda/layers/block.h"
#include "execute/cuda/layers/layernorm.h"
#include "execute/cuda/layers/linear.h"
#include "execute/cuda/layers/rmsnorm.h"
#include "execute/layers/attention.h"
#include "execute/layers/batchnorm.h"
#include "execute/layers/batchnorm2d.h"
#include "execute/layers/conv2d.h"
#include "execute/layers/embedding.h"
#include "execute/layers/pooling.h"
#include "execute/layers/transformer_block.h"
#include "execute/layers/gelu.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/linear.h"
#include "execute/layers/relu.h"
#include "execute/layers/residual_block.h"
#include "execute/layers/rmsnorm.h"
#include "execute/layers/sequential.h"
#include "execute/layers/squared_relu.h"
#include "execute/layers/swiglu.h"

namespace twinpipe::execute::cuda {

DeviceParam Upload(const Param& cpu) {
  const auto n = static_cast<int64_t>(cpu.value.size());
  DeviceParam p{cpu.name, DeviceBuffer(n), DeviceBuffer(n), DeviceBuffer(n), DeviceBuffer(n), cpu.tie};
  TP_CUDA(cudaMemcpy(p.value.get(), cpu.value.data(), static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

namespace {

// The twins of inner[first, last).
Result<std::unique_ptr<Layer>> BlockOf(std::string name, const std::vector<std::unique_ptr<execute::Layer>>& inner,
                                       bool residual, size_t first = 0, size_t last = SIZE_MAX) {
  std::vector<std::unique_ptr<Layer>> gpu;
  for (size_t i = first; i < std::min(last, inner.size()); ++i) {
    auto g = FromCpu(*inner[i]);
    if (!g) return g;
    gpu.push_back(std::move(*g));
  }
  return std::make_unique<Block>(std::move(name), std::move(gpu), residual);
}

// x + attention(norm1(x)), then + down(act(up(norm2(.)))): two residual
// blocks, the CPU block's arithmetic and parameter order.
Result<std::unique_ptr<Layer>> TransformerBlockOf(const execute::TransformerBlock& cpu) {
  auto attention = BlockOf("attention_branch", cpu.inner(), true, 0, 2);
  if (!attention) return attention;
  auto mlp = BlockOf("mlp_branch", cpu.inner(), true, 2);
  if (!mlp) return mlp;
  std::vector<std::unique_ptr<Layer>> both;
  both.push_back(std::move(*attention));
  both.push_back(std::move(*mlp));
  return std::make_unique<Block>("transformer_block", std::move(both), false);
}

}  // namespace

Result<std::unique_ptr<Layer>> FromCpu(execute::Layer& cpu) {
  if (auto* l = dynamic_cast<execute::Linear*>(&cpu)) return std::make_unique<Linear>(l->in(), l->out(), l->Params());
  if (dynamic_cast<execute::Relu*>(&cpu)) return std::make_unique<Relu>();
  if (dynamic_cast<execute::Gelu*>(&cpu)) return std::make_unique<Gelu>();
  if (dynamic_cast<execute::SquaredRelu*>(&cpu)) return std::make_unique<SquaredRelu>();
  if (dynamic_cast<execute::Swiglu*>(&cpu)) return std::make_unique<Swiglu>();
  if (auto* l = dynamic_cast<execute::RmsNorm*>(&cpu)) {
    return std::make_unique<RmsNorm>(l->features(), l->eps(), l->Params());
  }
  if (auto* l = dynamic_cast<execute::LayerNorm*>(&cpu)) {
    return std::make_unique<LayerNorm>(l->features(), l->eps(), l->Params());
  }
  if (auto* l = dynamic_cast<execute::BatchNorm*>(&cpu)) {
    return std::make_unique<BatchNorm>(l->features(), l->momentum(), l->eps(), l->Params());
  }
  if (auto* l = dynamic_cast<execute::ResidualBlock*>(&cpu)) {
    return BlockOf(std::string(l->Name()), l->inner(), l->residual());
  }
  if (auto* l = dynamic_cast<execute::Sequential*>(&cpu)) return BlockOf("sequential", l->inner(), false);
  if (auto* l = dynamic_cast<execute::TransformerBlock*>(&cpu)) return TransformerBlockOf(*l);
  if (auto* l = dynamic_cast<execute::Embedding*>(&cpu)) {
    return std::make_unique<Embedding>(l->vocab(), l->seq(), l->d(), l->Params());
  }
  if (auto* l = dynamic_cast<execute::SelfAttention*>(&cpu)) {
    return std::make_unique<SelfAttention>(l->shape(), l->rotary(), l->Params());
  }
  if (auto* l = dynamic_cast<execute::Conv2d*>(&cpu)) {
    return std::make_unique<Conv2d>(l->in_channels(), l->out_channels(), l->in_image(), l->stride(), l->Params());
  }
  if (auto* l = dynamic_cast<execute::BatchNorm2d*>(&cpu)) {
    return std::make_unique<BatchNorm2d>(l->channels(), l->pixels(), l->rows_norm().momentum(), l->rows_norm().eps(),
                                         l->Params());
  }
  if (auto* l = dynamic_cast<execute::GlobalAvgPool*>(&cpu)) {
    return std::make_unique<GlobalAvgPool>(l->channels(), l->pixels());
  }
  return Fail(fmt::format("the CUDA backend has no twin of the CPU's {} layer", cpu.Name()));
}

}  // namespace twinpipe::execute::cuda
