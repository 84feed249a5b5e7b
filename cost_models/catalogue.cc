#include "cost_models/catalogue.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include <fmt/format.h>

namespace twinpipe::cost {
namespace {

constexpr double kT = 1e12;   // tera
constexpr double kG = 1e9;    // giga
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kUs = 1e-6;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Host time: a kernel of eager framework code costs its host about 40 us (a
// PyTorch op is 20 us from the call to the kernel's start: NVIDIA,
// "Understanding the Visualization of Overhead and Latency in Nsight
// Systems"; a modelled kernel is kOpsPerKernel such ops), of which the CUDA
// launch is about 4 us (the driver's cuLaunchKernel path: NVIDIA's "Getting
// Started with CUDA Graphs" issues a kernel every 3.8 us at best from a
// stream on a V100) and the framework's dispatch 9 us per op. Calibration
// replaces both with fitted figures.
constexpr double kGpuKernelLaunch = 4 * kUs;
constexpr double kGpuLaunch = 9 * kUs;
// GPU time per framework op beyond its work: back-to-back kernels on one
// stream leave the GPU idle about 0.9 us between them on a V100 (NVIDIA,
// "Getting Started with CUDA Graphs": 3.8 us a launch for a 2.9 us kernel)
// and 1.3 us on an H100 (Hazy Research, "Look Ma, No Bubbles!", 2025).
constexpr double kGpuKernelGap = 1 * kUs;

// A GPU's kernel profile: SM count and fp16 peak without tensor cores from
// NVIDIA's architecture whitepapers (P100: 56 SMs, fp16 only on CUDA cores;
// V100: 80 SMs, 31.4 TFLOPS fp16 non-tensor; A100: 108 SMs, 78 TFLOPS fp16
// non-tensor; H100 SXM5: 132 SMs, 133.8 TFLOPS; H100 PCIe: 114 SMs, 102.4).
// Achievable fractions: cuBLAS reaches about 80% of the tensor-core peak on
// large aligned half-precision GEMMs (NVIDIA Deep Learning Performance
// Guide, "Matrix Multiplication Background", A100 figures), and streaming
// kernels about 80% of the memory bandwidth (BabelStream-class copy/triad
// measurements on V100/A100); the Hopper profiles take their own measured
// kernel tables (below). Calibration (`calibrate --runs`) fits the
// launch cost, the kernel floor and the GEMM and bandwidth fractions for a
// given framework and machine, each inside its physical range.
// P100s have no tensor cores: GPipe's fp32 convolutions there are taken at
// half of peak (the catalogue's figure before kernel profiles; calibrate).
// A GPU's kernel-level figures beyond its data sheet's (Device's own
// members of the same names).
struct GpuKernels {
  int sms = 0;
  double simt_half = 0;
  double gemm_efficiency = 0.8;
  double fp8_flops = 0;
  double fp8_gemm_ratio = 1;
  double bandwidth_efficiency = 0.8;
  double drift = 0;
  double overlap_interference = 0;
  double epilogue_store = 0;
};

Device Gpu(Device d, const GpuKernels& g) {
  d.sm_count = g.sms;
  d.simt_half_flops = g.simt_half;
  d.gemm_efficiency = g.gemm_efficiency;
  d.fp8_flops = g.fp8_flops;
  d.fp8_gemm_ratio = g.fp8_gemm_ratio;
  d.bandwidth_efficiency = g.bandwidth_efficiency;
  d.drift = g.drift;
  d.overlap_interference = g.overlap_interference;
  d.epilogue_store = g.epilogue_store;
  d.kernel_floor_s = kGpuKernelGap;
  d.kernel_launch_s = kGpuKernelLaunch;
  return d;
}

// FLUX's mean overlap efficiency of Transformer Engine's userbuffers on
// H800 (20%) less the first of t = 8 chunks: (0.8 - 1/8) / (1 - 1/8).
constexpr double kHopperOverlapInterference = (0.8 - 1.0 / 8) / (1 - 1.0 / 8);

// NCCL's all-reduce bus bandwidth over NVLink3 on a DGX A100 is about 230
// GB/s of the link's 300 GB/s per direction (nccl-tests all_reduce_perf
// figures NVIDIA publishes for DGX A100): 0.77. Other links: 0.8, an estimate.
//
// Every NCCL collective also pays a fixed cost whatever its size. vTrain's
// all_reduce_perf tables for one A100 node (traces/published/vtrain-a100/
// nccl_allreduce_a100.csv: 2 to 8 GPUs, 1 to 64 MiB) put it at 40 us over
// NVLink3: their times less the ring's own cost at 231 GB/s and 3 us a step
// have a median of 40.3 us from 1 to 16 MiB, 34 to 45 us for every group size.
// Not measured for the other links: none is assumed there.
Link WithCollective(Link l, double efficiency, double fixed_s = 0) {
  l.collective_efficiency = efficiency;
  l.collective_latency_s = fixed_s;
  return l;
}

}  // namespace

std::optional<Dtype> DtypeFromName(std::string_view name) {
  if (name == "fp32") return Dtype::kFp32;
  if (name == "tf32") return Dtype::kTf32;
  if (name == "fp16") return Dtype::kFp16;
  if (name == "bf16") return Dtype::kBf16;
  if (name == "fp8") return Dtype::kFp8;
  return std::nullopt;
}

std::string_view DtypeName(Dtype d) {
  switch (d) {
    case Dtype::kFp32: return "fp32";
    case Dtype::kTf32: return "tf32";
    case Dtype::kFp16: return "fp16";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp8: return "fp8";
  }
  return "fp32";
}

bool HalfStorage(Dtype d) { return d == Dtype::kFp16 || d == Dtype::kBf16 || d == Dtype::kFp8; }

int DtypeBytes(Dtype d) { return HalfStorage(d) ? 2 : 4; }

Dtype DefaultGradientDtype(Dtype d) { return d == Dtype::kFp16 ? Dtype::kFp16 : Dtype::kFp32; }

int GradientAccumulationBytes(Dtype d) { return DtypeBytes(DefaultGradientDtype(d)); }

double Device::PeakFlops(Dtype d) const {
  switch (d) {
    case Dtype::kFp32: return fp32_flops;
    case Dtype::kTf32: return tf32_flops;
    case Dtype::kFp16:
    case Dtype::kBf16: return half_flops;
    case Dtype::kFp8: return fp8_flops > 0 ? fp8_flops : half_flops;
  }
  return fp32_flops;
}

bool SameTiming(const Device& a, const Device& b) {
  auto timing = [](const Device& d) {
    return std::tie(d.name, d.fp32_flops, d.tf32_flops, d.half_flops, d.memory_bandwidth, d.launch_overhead_s,
                    d.kernel_launch_s, d.kernel_floor_s, d.sm_count, d.simt_half_flops, d.gemm_efficiency,
                    d.bandwidth_efficiency, d.fp8_flops, d.fp8_gemm_ratio, d.drift, d.overlap_interference,
                    d.epilogue_store);
  };
  return timing(a) == timing(b);
}

std::string_view ContentionName(Contention c) {
  switch (c) {
    case Contention::kPerPair: return "pair";
    case Contention::kHost: return "host";
    case Contention::kPerDevice: return "device";
  }
  return "pair";
}

std::optional<Contention> ContentionFromName(std::string_view name) {
  if (name == "pair") return Contention::kPerPair;
  if (name == "host") return Contention::kHost;
  if (name == "device") return Contention::kPerDevice;
  return std::nullopt;
}

const std::vector<Device>& DeviceCatalogue() {
  static const std::vector<Device> devices = {
      // NVIDIA Tesla P100 data sheet (2016): PCIe 16 GB: 9.3 TFLOPS fp32,
      // 18.7 TFLOPS fp16, 732 GB/s; SXM2: 10.6 / 21.2 TFLOPS, 732 GB/s. No TF32.
      Gpu({"P100-PCIe", 9.3 * kT, 9.3 * kT, 18.7 * kT, 732 * kG, 16 * kGiB, kGpuLaunch},
          {.sms = 56, .simt_half = 18.7 * kT, .gemm_efficiency = 0.5}),
      Gpu({"P100-SXM2", 10.6 * kT, 10.6 * kT, 21.2 * kT, 732 * kG, 16 * kGiB, kGpuLaunch},
          {.sms = 56, .simt_half = 21.2 * kT, .gemm_efficiency = 0.5}),
      // NVIDIA Tesla V100 data sheet: SXM2 15.7 TFLOPS fp32, 125 TFLOPS tensor
      // (fp16), 900 GB/s, 32 GB. No TF32 (fp32 path).
      Gpu({"V100", 15.7 * kT, 15.7 * kT, 125 * kT, 900 * kG, 32 * kGiB, kGpuLaunch},
          {.sms = 80, .simt_half = 31.4 * kT}),
      // NVIDIA A100 data sheet (SXM): 19.5 TFLOPS fp32, 156 TF32, 312 bf16/fp16
      // dense; 40 GB at 1,555 GB/s, 80 GB at 2,039 GB/s.
      Gpu({"A100-40GB", 19.5 * kT, 156 * kT, 312 * kT, 1555 * kG, 40 * kGiB, kGpuLaunch},
          {.sms = 108, .simt_half = 78 * kT}),
      Gpu({"A100-80GB", 19.5 * kT, 156 * kT, 312 * kT, 2039 * kG, 80 * kGiB, kGpuLaunch},
          {.sms = 108, .simt_half = 78 * kT}),
      // NVIDIA H100 data sheet, dense figures (the sheet's tensor figures are
      // with sparsity; halved here): SXM 67 TFLOPS fp32, 494.5 TF32, 989.5
      // bf16, 1,979 fp8, 3.35 TB/s, 80 GB; PCIe 51 / 378 / 756 / 1,513, 2.0
      // TB/s, 80 GB.
      //
      // Large GEMMs (cuBLAS through torch.matmul, the best shape of a sweep
      // of random operands: S. Bekman, "Machine Learning Engineering",
      // compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS",
      // github.com/stas00/ml-engineering at 744d01e): H100 SXM BF16 794.5
      // TFLOP/s (0.80 of 989.5), FP8 1,402.6 (0.71 of 1,979: 0.883 of the
      // BF16 fraction); H200 BF16 as the H100, FP8 1,453.4 (0.73: 0.914);
      // H100 PCIe 499.5 BF16 (0.66 of 756; github.com/mag-/gpu_benchmark).
      // The A100's sweep reaches 271.2 (0.87), but at its 400 W limit an
      // 8192^3 GEMM of random data holds 258 (0.83; H. He, "Strangely,
      // Matrix Multiplications on GPUs Run Faster When Given Predictable
      // Data", 2024) and the A100 PCIe 0.81: the A100 profiles keep 0.8,
      // the low end of that band.
      //
      // Those are the best shapes of short sweeps. Over a run's GEMMs an
      // H100 SXM and an H200 hold less: timed one after another at the 48
      // block shapes of the published H100 runs (GPT-3 175B, Llama 3.1 70B
      // and 8B; bench/gpu_kernel_table.py on a lent GPU of each,
      // traces/recorded/{h100,h200}/kernel_table.json), the tiled model
      // fits them at 0.742 and 0.727 of the BF16 peak (3.6% and 3.9% RMS),
      // and a copy or an add streams at 0.89 of the HBM bandwidth (0.890 /
      // 0.895 of 3.35 TB/s, 0.889 / 0.911 of 4.8). The same shapes in FP8
      // (torch._scaled_mm, e4m3, per-tensor scales) put the FP8 fraction at
      // 0.928 and 0.916 of the BF16 one through the same tiled model (the
      // median of model over measured, 3.9% and 3.7% RMS). The model's
      // speed-up at those shapes, 1.80 and 1.81, is the measured median's,
      // 1.79 on both; the sweeps' best shapes had said 1.77 and 1.83.
      //
      // Those fits have each tile's epilogue write its outputs after its K
      // loop at the SM's share of the bandwidth (epilogue_store 1): a 128 x
      // 256 tile's 64 KiB of BF16 takes 2.9 us on an H100, as long as 246
      // of its BF16 K steps or 457 of its FP8 ones, so a GEMM of short K
      // gains less from FP8 than a long one, as the tables show (Llama 3.1
      // 70B's projection, K 2,048: 1.60 to 1.63; its FC1 input gradient, K
      // 14,336: 1.86 to 1.94). With the store hidden, as the model had it,
      // the same tables fit at 4.4% / 4.5% RMS (BF16) and 6.2% / 6.3% (FP8,
      // whose speed-up no shape then changed). The Hopper profiles take
      // these sustained figures (the PCIe card the SXM's FP8 ratio and
      // store); measured_kernels_test.cc holds them to the tables. No
      // table measures another GPU: their stores stay hidden (0), and the
      // vTrain A100 runs, calibrated or not, are predicted 0.9 to 2.6 points
      // worse with the store shown.
      //
      // Drift: the same lent GPUs ran the CUDA executor on one device
      // (traces/recorded/{h100,h200}/loop, K = 1: every op of a kind the
      // same work, repeated over a step's micro-batches). The spread of
      // those repeats after the first (its warm-up is common to a run's
      // GPUs), as stdev / sqrt(mean) per op kind, has a median of 0.434 ms
      // over a second of work on the H100 and 0.542 ms on the H200 (35 op
      // kinds each, from 0.04 to 42: the dense transformer's ops 0.04 to
      // 0.65, the Llama-class ones, whose host issue varies more, 1 to 42;
      // scripts/drift_from_traces.py, drift.json beside the traces;
      // measured_kernels_test.cc holds these to them). One GPU's own spread
      // is the least a cluster of them shows. The H100 PCIe takes the
      // SXM's: it has no traces.
      //
      // Overlap interference: the FLUX paper (Chang et al., arXiv
      // 2406.06858, sections 2.3 and 6, figure 13) times Transformer
      // Engine 1.4's userbuffers overlaps (ring-exchange all-gather + GEMM,
      // GEMM + pipelined reduce-scatter, t = 8, bf16, GPT-3 175B's shapes
      // at 1,024 to 8,192 tokens) on H800 NVLink against the same GEMM and
      // NCCL in series: on average 20% of the collective's time is saved
      // (its "overlap efficiency"), so 80% still shows. Of that, the first
      // of the t chunks (1/8) is what the model shows anyway; the rest,
      // (0.8 - 1/8) / (7/8) = 0.77 of the hidden share, is what the overlap
      // costs the GEMM beside it (split GEMMs, the SMs and bandwidth the
      // collective takes). Every Hopper profile takes it; no other GPU has
      // a measurement (the paper's A100 figures, -61% on NVLink, say the
      // overlap there is slower than none, which 0 to 1 cannot hold).
      Gpu({"H100-SXM", 67 * kT, 494.5 * kT, 989.5 * kT, 3350 * kG, 80 * kGiB, kGpuLaunch},
          {.sms = 132, .simt_half = 133.8 * kT, .gemm_efficiency = 0.742, .fp8_flops = 1979 * kT,
           .fp8_gemm_ratio = 0.928, .bandwidth_efficiency = 0.89, .drift = 0.434e-3,
           .overlap_interference = kHopperOverlapInterference, .epilogue_store = 1}),
      Gpu({"H100-PCIe", 51 * kT, 378 * kT, 756 * kT, 2000 * kG, 80 * kGiB, kGpuLaunch},
          {.sms = 114, .simt_half = 102.4 * kT, .gemm_efficiency = 0.66, .fp8_flops = 1513 * kT,
           .fp8_gemm_ratio = 0.928, .bandwidth_efficiency = 0.8, .drift = 0.434e-3,
           .overlap_interference = kHopperOverlapInterference, .epilogue_store = 1}),
      // NVIDIA H200 data sheet: the H100 SXM's compute (1,979 TFLOPS fp8
      // dense), 141 GB at 4.8 TB/s.
      Gpu({"H200", 67 * kT, 494.5 * kT, 989.5 * kT, 4800 * kG, 141 * kG, kGpuLaunch},
          {.sms = 132, .simt_half = 133.8 * kT, .gemm_efficiency = 0.727, .fp8_flops = 1979 * kT,
           .fp8_gemm_ratio = 0.916, .bandwidth_efficiency = 0.89, .drift = 0.542e-3,
           .overlap_interference = kHopperOverlapInterference, .epilogue_store = 1}),
      // Cloud TPU docs (cloud.google.com/tpu/docs/v2, /v3): a v2 chip has two
      // cores, 45 TFLOPS bf16, 16 GiB HBM at 600 GB/s; a v3 chip 123 TFLOPS,
      // 32 GiB at 900 GB/s. Per core: half. The MXU multiplies in bf16; fp32
      // matmuls take several bf16 passes, taken here as a third of bf16 peak
      // (an estimate: calibrate).
      {"TPUv2", 22.5 / 3 * kT, 22.5 / 3 * kT, 22.5 * kT, 300 * kG, 8 * kGiB, 1 * kUs},
      {"TPUv3", 61.5 / 3 * kT, 61.5 / 3 * kT, 61.5 * kT, 450 * kG, 16 * kGiB, 1 * kUs},
      // One CPU core as the reference executor uses it: AVX2 with two FMA
      // units at ~3 GHz gives 2 x 8 x 2 x 3e9 = 96 GFLOP/s fp32 peak (Intel
      // optimization manual, Haswell and later); no fast half precision. A
      // DDR4 channel share of ~10 GB/s; 16 GiB. Estimates: calibrate.
      // Its workers do their own sends and receives.
      Device{.name = "CPU", .fp32_flops = 96 * kG, .tf32_flops = 96 * kG, .half_flops = 96 * kG,
             .memory_bandwidth = 10 * kG, .memory_bytes = 16 * kGiB, .launch_overhead_s = 1 * kUs,
             .comm_on_compute = true},
  };
  return devices;
}

const std::vector<Link>& LinkCatalogue() {
  static const std::vector<Link> links = {
      // PCI-SIG: x16 gives 15.75 GB/s (gen3), 31.5 (gen4), 63 (gen5) per
      // direction after encoding; DMA achieves ~80% of that in
      // p2pBandwidthLatencyTest-style measurements (CUDA samples), so 12.6 /
      // 25 / 50 GB/s. Latency ~10 us for a peer copy (same measurements).
      {"pcie3", 10 * kUs, 12.6 * kG, false, Contention::kPerPair},
      {"pcie4", 10 * kUs, 25 * kG, false, Contention::kPerPair},
      {"pcie5", 10 * kUs, 50 * kG, false, Contention::kPerPair},
      // Host-staged: device-to-host into pinned memory, then host-to-device,
      // each at the PCIe rate above and each with its own latency; all staged
      // traffic of a host shares its memory path (GPipe's P100s without P2P).
      {"pcie3-host-staged", 10 * kUs, 12.6 * kG, true, Contention::kHost},
      {"pcie4-host-staged", 10 * kUs, 25 * kG, true, Contention::kHost},
      {"pcie5-host-staged", 10 * kUs, 50 * kG, true, Contention::kHost},
      // NVLink per GPU, per direction (NVIDIA P100/V100/A100/H100 data
      // sheets: 160, 300, 600, 900 GB/s bidirectional in total). Latency
      // ~3 us for a peer copy (p2pBandwidthLatencyTest-style measurements).
      {"nvlink1", 3 * kUs, 80 * kG, false, Contention::kPerPair},
      {"nvlink2", 3 * kUs, 150 * kG, false, Contention::kPerPair},
      WithCollective({"nvlink3", 3 * kUs, 300 * kG, false, Contention::kPerPair}, 0.77, 40 * kUs),
      {"nvlink4", 3 * kUs, 450 * kG, false, Contention::kPerPair},
      // InfiniBand HDR 200 Gb/s and NDR 400 Gb/s per port (NVIDIA ConnectX-6 /
      // ConnectX-7 product briefs): 25 and 50 GB/s per direction; a few us
      // end to end through NCCL's net transport.
      {"ib-hdr", 5 * kUs, 25 * kG, false, Contention::kPerDevice},
      {"ib-ndr", 5 * kUs, 50 * kG, false, Contention::kPerDevice},
      // RoCE at 400 Gb/s per port (ConnectX-7 in Ethernet mode, as in
      // Spectrum-X clusters): NDR's rate; a little more latency through the
      // Ethernet switches (an estimate).
      {"roce", 6 * kUs, 50 * kG, false, Contention::kPerDevice},
      // TPU inter-chip interconnect: 656 Gb/s per link for v3 (Jouppi et al.,
      // "A Domain-Specific Supercomputer for Training Deep Neural Networks",
      // CACM 2020), about 82 GB/s per direction.
      {"tpu-ici", 2 * kUs, 82 * kG, false, Contention::kPerPair},
      // In-process: a memcpy between threads of one host, ~10 GB/s for one
      // core's copy; ~1 us to hand a buffer over. Estimates: calibrate.
      {"inproc", 1 * kUs, 10 * kG, false, Contention::kPerDevice},
  };
  return links;
}

const Device* FindDevice(std::string_view name) {
  for (const auto& d : DeviceCatalogue()) {
    if (EqualsIgnoreCase(d.name, name)) return &d;
  }
  return nullptr;
}

const Link* FindLink(std::string_view name) {
  for (const auto& l : LinkCatalogue()) {
    if (EqualsIgnoreCase(l.name, name)) return &l;
  }
  return nullptr;
}

std::string DeviceNames() {
  std::vector<std::string> names;
  for (const auto& d : DeviceCatalogue()) names.push_back(d.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string LinkNames() {
  std::vector<std::string> names;
  for (const auto& l : LinkCatalogue()) names.push_back(l.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace twinpipe::cost
