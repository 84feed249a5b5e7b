#include "execute/cuda/from_cpu.h"

#include <fmt/format.h>

#include "execute/cuda/check.h"
#include "execute/cuda/layers/activations.h"
#include "execute/cuda/layers/batchnorm.h"
#include "execute/cuda/layers/block.h"
#include "execute/cuda/layers/layernorm.h"
#include "execute/cuda/layers/linear.h"
#include "execute/layers/batchnorm.h"
#include "execute/layers/gelu.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/linear.h"
#include "execute/layers/relu.h"
#include "execute/layers/residual_block.h"
#include "execute/layers/sequential.h"

namespace twinpipe::execute::cuda {

DeviceParam Upload(const Param& cpu) {
  const auto n = static_cast<int64_t>(cpu.value.size());
  DeviceParam p{cpu.name, DeviceBuffer(n), DeviceBuffer(n), DeviceBuffer(n), DeviceBuffer(n)};
  TP_CUDA(cudaMemcpy(p.value.get(), cpu.value.data(), static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

namespace {

Result<std::unique_ptr<Layer>> BlockOf(std::string name, const std::vector<std::unique_ptr<execute::Layer>>& inner,
                                       bool residual) {
  std::vector<std::unique_ptr<Layer>> gpu;
  for (const auto& l : inner) {
    auto g = FromCpu(*l);
    if (!g) return g;
    gpu.push_back(std::move(*g));
  }
  return std::make_unique<Block>(std::move(name), std::move(gpu), residual);
}

}  // namespace

Result<std::unique_ptr<Layer>> FromCpu(execute::Layer& cpu) {
  if (auto* l = dynamic_cast<execute::Linear*>(&cpu)) return std::make_unique<Linear>(l->in(), l->out(), l->Params());
  if (dynamic_cast<execute::Relu*>(&cpu)) return std::make_unique<Relu>();
  if (dynamic_cast<execute::Gelu*>(&cpu)) return std::make_unique<Gelu>();
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
  return Fail(fmt::format("the CUDA backend has no {} layer yet (it runs the mlp generator's layers: linear, relu, "
                          "gelu, layernorm, batchnorm and their blocks)", cpu.Name()));
}

}  // namespace twinpipe::execute::cuda
