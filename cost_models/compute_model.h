// Compute time of a layer's ops on a device. A layer given as its kernels
// (generated transformers) is timed kernel by kernel: a GEMM by its shape
// (output tiles filling the SMs in waves, tensor-core or CUDA-core peak by
// alignment, a small-K penalty) against the bytes it moves, a memory-bound
// kernel by its bytes at the achievable bandwidth; the op takes the longer
// of its kernels' device time and the host time to issue them. Any other
// layer: a roofline (FLOPs at peak x efficiency against bytes at memory
// bandwidth) plus one launch.
//
//   double t = LayerOpTime(layer, ir::OpKind::kForward, device, dtype, 0.8, 32);
#pragma once

#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "cost_models/model.h"
#include "ir/op.h"

namespace twinpipe::cost {

// FLOPs of one op kind for one sample: F and R run the forward, B both
// backward halves, I the input half, W the weight half. Comm ops: 0. R of a
// layer that is not rematerialized: 0.
double LayerOpFlops(const Layer& layer, ir::OpKind kind);

// Framework ops one modelled kernel stands for when it is issued: a GEMM
// with its bias, reshapes and casts, an elementwise kernel with its
// allocation and dispatch (an estimate for PyTorch eager code such as
// Megatron-LM; calibration fits the launch overhead they multiply).
inline constexpr double kOpsPerKernel = 4;

// Seconds of one kernel over `samples` samples on the device's GPU alone
// (no launch): `efficiency` is the GEMM's achievable fraction of peak; a
// tensor-parallel collective runs on `tp_link` (the intra-node link).
double KernelTime(const Kernel& kernel, double samples, const Device& device, Dtype dtype, double efficiency,
                  const Link* tp_link = nullptr);

// Seconds for `samples` samples (a micro-batch) of one op kind of one layer.
// With kernels: max(sum of the kind's kernel times, each but a collective
// with kOpsPerKernel x the device's kernel floor, kernels x kOpsPerKernel x
// launch). Without: launch + max(flops / (peak(dtype) x efficiency),
// bytes / bandwidth), where bytes = parameter reads (and gradient writes for
// backward) + activations in, out and stashed.
// Tensor-parallel collectives among the kernels are priced on `tp_link`
// (without one, layers of tensor parallelism 1 have none).
double LayerOpTime(const Layer& layer, ir::OpKind kind, const Device& device, Dtype dtype,
                   double efficiency, double samples, const Link* tp_link = nullptr);

// Bytes per parameter an optimizer step reads and writes: Adam in mixed
// precision (half weights and gradients, fp32 master weights and two
// moments) 44: unscale the gradient to fp32 (2 + 4), its norm for clipping
// (4), Adam (reads gradient, master, both moments: 16; writes master and
// moments: 12), the half copy of the master (4 + 2). Adam in fp32: 28. SGD
// with momentum: 20 (reads weight, gradient, momentum; writes two).
double OptimizerStepBytes(const std::string& optimizer, Dtype dtype);

// Seconds of the optimizer step over `params` parameters on the device.
double OptimizerStepTime(const std::string& optimizer, Dtype dtype, double params, const Device& device);

}  // namespace twinpipe::cost
