// BF16 operands for the GEMMs of Precision::kBf16 (gemm.h): fp32 device data
// rounded to bf16 (to nearest, ties to even) on the context's stream, and a
// parameter's value kept in bf16 from one write of the value to the next, so
// that a weight is converted once per optimizer step rather than once per
// product.
//
//   DeviceTensor x16 = ToBf16(ctx, x);                   // (B, in) in bf16: half x's bytes
//   const __nv_bfloat16* w16 = ValueBf16(ctx, weight);   // converted again only after a write
#pragma once

#include <cuda_bf16.h>

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

// n floats at src, as bf16 at dst (n of them), queued on ctx.stream.
void ConvertToBf16(const Context& ctx, const float* src, long long n, __nv_bfloat16* dst);

// t in bf16: a new tensor counted in ctx.account, or t itself when it is
// bf16 already.
DeviceTensor ToBf16(const Context& ctx, const DeviceTensor& t);

// p.value in bf16: p.value_bf16, allocated at the first call and converted
// again (on ctx.stream, after the writes queued there) whenever p.version
// has moved on since. The value's writers queue on the same stream.
const __nv_bfloat16* ValueBf16(const Context& ctx, DeviceParam& p);

}  // namespace twinpipe::execute::cuda
