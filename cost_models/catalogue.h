// The device and link catalogue: peak compute per dtype, memory, launch
// overhead; per-direction latency and bandwidth of links and how they share
// bandwidth. Names are case-insensitive ("h100-sxm" finds "H100-SXM"). Every
// figure cites its source in catalogue.cc.
//
//   const Device* d = FindDevice("H100-SXM");
//   double peak = d->PeakFlops(Dtype::kBf16);   // FLOP/s
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twinpipe::cost {

// A model's precision. kFp8 is Transformer Engine's FP8 training: the GEMMs
// of the blocks' linear layers take FP8 operands (E4M3 forward, E5M2
// gradients) at the device's FP8 rate, and everything else, activations and
// weights included, is BF16.
enum class Dtype { kFp32, kTf32, kFp16, kBf16, kFp8 };
std::optional<Dtype> DtypeFromName(std::string_view name);
std::string_view DtypeName(Dtype dtype);
// Bytes of one stored element (activations, parameters): tf32 is stored as
// fp32, fp8 training stores BF16 (its FP8 operands live inside the GEMMs'
// casts: compute_model.h).
int DtypeBytes(Dtype dtype);
// Half-precision storage: fp16, bf16, and fp8 training (BF16 outside GEMMs).
bool HalfStorage(Dtype dtype);
// The precision of the weight gradients accumulated across the micro-
// batches and reduced across the replicas (Megatron's main_grad) when the
// config does not say (/training/gradient_dtype): Megatron-LM's default,
// fp16 in fp16 training (--accumulate-allreduce-grads-in-fp32 off), fp32
// otherwise (bf16 and FP8 training force it on unless --grad-reduce-in-bf16).
Dtype DefaultGradientDtype(Dtype dtype);
// Its bytes an element: DtypeBytes(DefaultGradientDtype(dtype)).
int GradientAccumulationBytes(Dtype dtype);

struct Device {
  std::string name;
  double fp32_flops = 0;       // peak FLOP/s, dense
  double tf32_flops = 0;       // peak FLOP/s with TF32 tensor cores (= fp32 where none)
  double half_flops = 0;       // peak FLOP/s in fp16/bf16 (dense)
  double memory_bandwidth = 0; // bytes/s
  double memory_bytes = 0;     // capacity, bytes
  double launch_overhead_s = 0;  // host time of one framework op's dispatch (beyond the kernel launches it makes)
  double kernel_launch_s = 0;    // host time of one kernel launch (the CUDA driver's); 0: none apart
  // GPU time each framework op adds beyond its bytes and FLOPs: the gap
  // between back-to-back kernels on a stream, a kernel's ramp and tail, and
  // the small kernels (bias, cast, copy) an op issues beside its main one.
  // Charged to kernel-costed layers (per framework op of a kernel, not
  // to collectives, whose measured cost has it); 0: unknown (none).
  double kernel_floor_s = 0;
  // The profile a GEMM's and a memory-bound kernel's time come from (see
  // compute_model.h). sm_count 0: no wave model (TPU, CPU).
  int sm_count = 0;
  double simt_half_flops = 0;     // fp16/bf16 peak without tensor cores (GEMMs whose shapes they cannot take)
  double gemm_efficiency = 0.5;   // achievable fraction of peak by a large, aligned GEMM
  double bandwidth_efficiency = 0.8;  // achievable fraction of memory bandwidth by streaming kernels
  // Its executor runs sends and receives on the compute stream, between
  // compute ops, as the CPU backend's workers do; otherwise they overlap.
  bool comm_on_compute = false;
  // Dense FP8 tensor-core peak, FLOP/s (0: no FP8 tensor cores: Ampere and older).
  double fp8_flops = 0;
  // A large FP8 GEMM's achievable fraction of the FP8 peak, relative to a
  // large BF16 GEMM's of the BF16 peak (gemm_efficiency): the FP8 GEMM's
  // fraction is gemm_efficiency x fp8_gemm_ratio, so that a calibration's
  // GEMM efficiency moves both.
  double fp8_gemm_ratio = 1;
  // How far apart repeats of the same work come out (the clocks, the power
  // limit, the host's issue): a stretch of W seconds of work takes its
  // predicted time with a standard deviation of drift x sqrt(W), in
  // s^(1/2), independently on each GPU (each tensor-parallel group, which
  // its own collectives keep in step). Priced where a compute stream waits
  // for a whole group that last met a stretch of work ago (the FP8 amax
  // reduction, plan_costs.cc): the group waits for its slowest. 0: none
  // counted.
  double drift = 0;
  // The share of a collective's seconds that still lengthens the compute it
  // is overlapped with (Kernel::overlaps: Transformer Engine's userbuffers
  // beside their GEMMs, context parallelism's K/V ring beside the flash
  // attention): the SMs, memory bandwidth and split GEMMs the overlap
  // costs. A GEMM of g seconds beside h hidden seconds takes
  // max(g + x min(h, g), h): the slowing lasts while both run, so the GEMM
  // grows by at most x g. 0 hides all of it; 1 runs it in series while the
  // collective is the shorter. 1 - x is the overlap efficiency of the FLUX
  // paper (Chang et al. 2024) over the hidden share, measured with
  // collectives shorter than their GEMMs.
  double overlap_interference = 0;
  // The share of a GEMM tile's output store (its epilogue) that follows its
  // K loop in series, at the SM's share of the memory bandwidth, instead of
  // hiding behind other tiles' math (TiledGemmSeconds): 0 to 1. A weight
  // gradient's store into the kept gradient follows its math on every GPU.
  double epilogue_store = 0;

  // Peak FLOP/s of a GEMM in `dtype`: fp8 is the FP8 peak (the half peak on a
  // device without FP8), the rest their own.
  double PeakFlops(Dtype dtype) const;
};

// Two devices whose ops take the same time (their memory and how they run
// comm may differ): the layers' times of one serve the other.
bool SameTiming(const Device& a, const Device& b);

// How transfers over a link share bandwidth.
enum class Contention {
  kPerPair,     // each device pair has its own path (NVLink, P2P through a switch port)
  kHost,        // all transfers through one host's memory share it (host-staged PCIe)
  kPerDevice,   // each device's port is shared by its transfers (NIC, in-process copy engine)
};
std::string_view ContentionName(Contention c);
std::optional<Contention> ContentionFromName(std::string_view name);

struct Link {
  std::string name;
  double latency_s = 0;        // alpha, per transfer, per direction
  double bandwidth = 0;        // beta^-1, bytes/s per direction
  bool host_staged = false;    // D2H then H2D through pinned host memory
  Contention contention = Contention::kPerPair;
  // Achievable NCCL bus bandwidth of a ring collective over this link, as a
  // fraction of `bandwidth` (all-reduce moves 2(n-1)/n of the bytes at it).
  double collective_efficiency = 0.8;
  // A collective's fixed cost whatever its size: NCCL's kernel start and its
  // ranks' handshake. Added once per collective, on top of the ring's or the
  // tree's per-step latencies.
  double collective_latency_s = 0;
};

const std::vector<Device>& DeviceCatalogue();
const std::vector<Link>& LinkCatalogue();
// Case-insensitive lookups; nullptr when unknown.
const Device* FindDevice(std::string_view name);
const Link* FindLink(std::string_view name);
// "P100-PCIe, P100-SXM2, ..." for messages.
std::string DeviceNames();
std::string LinkNames();

}  // namespace twinpipe::cost
