// The CNN generator's block: 3x3 convolution (stride 2 when it reduces),
// 2-D batchnorm and ReLU; a block that keeps the shape adds its input
// (residual), as ResNet's do.
//
//   auto blk = MakeConvBlock(seed, /*in=*/16, /*out=*/16, /*image=*/32, /*stride=*/1);  // residual
#pragma once

#include <memory>

#include "execute/layers/residual_block.h"

namespace twinpipe::execute {

std::unique_ptr<ResidualBlock> MakeConvBlock(uint64_t seed, int in_channels, int out_channels, int image, int stride);

}  // namespace twinpipe::execute
