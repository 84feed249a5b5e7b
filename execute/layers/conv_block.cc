#include "execute/layers/conv_block.h"

#include "execute/layers/batchnorm2d.h"
#include "execute/layers/conv2d.h"
#include "execute/layers/relu.h"

namespace twinpipe::execute {

std::unique_ptr<ResidualBlock> MakeConvBlock(uint64_t seed, int in_channels, int out_channels, int image, int stride) {
  auto conv = std::make_unique<Conv2d>(seed, in_channels, out_channels, image, stride);
  const int out = conv->out_image();
  std::vector<std::unique_ptr<Layer>> inner;
  inner.push_back(std::move(conv));
  inner.push_back(std::make_unique<BatchNorm2d>(out_channels, out * out));
  inner.push_back(std::make_unique<Relu>());
  const bool residual = in_channels == out_channels && stride == 1;
  return std::make_unique<ResidualBlock>(residual ? "residual_conv_block" : "conv_block", std::move(inner), residual);
}

}  // namespace twinpipe::execute
