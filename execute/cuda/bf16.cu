#include "execute/cuda/bf16.h"

#include <cstdint>

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void FloatsToBf16(const float* src, long long n, __nv_bfloat16* dst) {
  TP_GRID_STRIDE(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

// Four at a time: one 16-byte load, two 4-byte stores (the same rounding).
__global__ void Float4sToBf16(const float4* src, long long quads, __nv_bfloat162* dst) {
  TP_GRID_STRIDE(i, quads) {
    const float4 v = src[i];
    dst[2 * i] = __floats2bfloat162_rn(v.x, v.y);
    dst[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
  }
}

bool AlignedTo(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void ConvertToBf16(const Context& ctx, const float* src, long long n, __nv_bfloat16* dst) {
  long long done = 0;
  // Vector loads need src 16-byte aligned (a tensor's Rows view may not be).
  if (const long long quads = n / 4; quads > 0 && AlignedTo(src, 16) && AlignedTo(dst, 8)) {
    Float4sToBf16<<<Blocks(quads), kThreads, 0, ctx.stream>>>(reinterpret_cast<const float4*>(src), quads,
                                                              reinterpret_cast<__nv_bfloat162*>(dst));
    Launched("fp32 to bf16 (by four)");
    done = quads * 4;
  }
  if (done < n) {
    FloatsToBf16<<<Blocks(n - done), kThreads, 0, ctx.stream>>>(src + done, n - done, dst + done);
    Launched("fp32 to bf16");
  }
}

DeviceTensor ToBf16(const Context& ctx, const DeviceTensor& t) {
  if (t.element() == Element::kBf16) return t;
  DeviceTensor t16 = ctx.AllocBf16(t.rows(), t.cols());
  ConvertToBf16(ctx, t.data(), t.size(), t16.bf16());
  return t16;
}

const __nv_bfloat16* ValueBf16(const Context& ctx, DeviceParam& p) {
  const bool made = !p.value_bf16.empty();
  if (!made) p.value_bf16 = DeviceBf16Buffer(p.value.size());
  if (!made || p.value_bf16_version != p.version) {
    ConvertToBf16(ctx, p.value.get(), p.value.size(), p.value_bf16.get());
    p.value_bf16_version = p.version;
  }
  return p.value_bf16.get();
}

}  // namespace twinpipe::execute::cuda
