// The catalogue held against what does not come from it: the names the design
// promises, the vendors' published figures (checked only through what the
// catalogue derives from them: dense from sparse peaks, per-core from
// per-chip, per-direction from bidirectional, bytes from bits, the
// precisions' ratios, and figures within the sheets' peaks), properties every
// entry must have, lookup behaviour, and a round trip of every entry through
// the config's custom devices and links.
#include "cost_models/catalogue.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "cost_models/config.h"
#include "cost_models/model.h"

namespace twinpipe::cost {
namespace {

constexpr double kT = 1e12, kG = 1e9;

std::string WithCase(std::string_view name, int (*change)(int)) {
  std::string out(name);
  for (char& ch : out) ch = static_cast<char>(change(static_cast<unsigned char>(ch)));
  return out;
}

// A config whose cluster is `cluster` (a JSON object's members), on one device.
Result<Config> WithCluster(const std::string& cluster) {
  return LoadConfig(fmt::format(R"({{
    "model": {{"layers": [{{"name": "a", "fwd_flops": 1e9, "out_bytes": 4096}}]}},
    "training": {{"batch": 8, "microbatches": 4}},
    "pipeline": {{"stages": 1}},
    "cluster": {{{}}}}})",
                                cluster),
                    "catalogue.json");
}

// DESIGN.md section 5 names these; configs and scripts use them.
TEST(Catalogue, HasEveryDesignName) {
  for (const char* name : {"P100-PCIe", "P100-SXM2", "V100", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe",
                           "H200", "TPUv2", "TPUv3", "CPU"}) {
    const Device* d = FindDevice(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->name, name);
  }
  for (const char* name : {"pcie3", "pcie4", "pcie5", "pcie3-host-staged", "pcie4-host-staged", "pcie5-host-staged",
                           "nvlink1", "nvlink2", "nvlink3", "nvlink4", "ib-hdr", "ib-ndr", "tpu-ici", "inproc"}) {
    const Link* l = FindLink(name);
    ASSERT_NE(l, nullptr) << name;
    EXPECT_EQ(l->name, name);
  }
}

TEST(Catalogue, LookupIgnoresCaseAndRejectsUnknownNames) {
  for (const Device& d : DeviceCatalogue()) {
    EXPECT_EQ(FindDevice(WithCase(d.name, ::tolower)), &d) << d.name;
    EXPECT_EQ(FindDevice(WithCase(d.name, ::toupper)), &d) << d.name;
    EXPECT_EQ(FindDevice(d.name + " "), nullptr) << d.name;
    EXPECT_EQ(FindDevice(d.name.substr(0, d.name.size() - 1)), nullptr) << d.name;
  }
  for (const Link& l : LinkCatalogue()) {
    EXPECT_EQ(FindLink(WithCase(l.name, ::tolower)), &l) << l.name;
    EXPECT_EQ(FindLink(WithCase(l.name, ::toupper)), &l) << l.name;
    EXPECT_EQ(FindLink(l.name + "x"), nullptr) << l.name;
  }
  EXPECT_EQ(FindDevice("H300"), nullptr);
  EXPECT_EQ(FindDevice(""), nullptr);
  EXPECT_EQ(FindLink("nvlink9"), nullptr);
  EXPECT_EQ(FindLink(""), nullptr);
}

TEST(Catalogue, NameListsHoldEveryEntryInOrder) {
  std::string devices, links;
  for (const Device& d : DeviceCatalogue()) devices += (devices.empty() ? "" : ", ") + d.name;
  for (const Link& l : LinkCatalogue()) links += (links.empty() ? "" : ", ") + l.name;
  EXPECT_EQ(DeviceNames(), devices);
  EXPECT_EQ(LinkNames(), links);
}

TEST(Catalogue, TheConfigFindsNamesInAnyCaseAndListsTheKnownOnesForAnUnknownOne) {
  auto c = WithCluster(R"("device": "h100-sxm", "link": "NVLINK4", "inter_node_link": "Ib-Ndr")");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->cluster.devices[0].name, "H100-SXM");
  EXPECT_EQ(c->cluster.link.name, "nvlink4");
  EXPECT_EQ(c->cluster.inter_node_link.name, "ib-ndr");

  auto device = WithCluster(R"("device": "H300")");
  ASSERT_FALSE(device);
  EXPECT_NE(device.error().message.find("catalogue.json: /cluster/device: unknown device 'H300'"), std::string::npos)
      << device.error().message;
  for (const Device& d : DeviceCatalogue()) {
    EXPECT_NE(device.error().message.find(d.name), std::string::npos) << d.name << ": " << device.error().message;
  }
  auto link = WithCluster(R"("device": "V100", "link": "nvlink9")");
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message.find("catalogue.json: /cluster/link: unknown link 'nvlink9'"), std::string::npos)
      << link.error().message;
  for (const Link& l : LinkCatalogue()) {
    EXPECT_NE(link.error().message.find(l.name), std::string::npos) << l.name << ": " << link.error().message;
  }
}

TEST(Catalogue, EveryDeviceIsConsistent) {
  for (const Device& d : DeviceCatalogue()) {
    SCOPED_TRACE(d.name);
    for (Dtype dtype : {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16}) {
      EXPECT_GT(d.PeakFlops(dtype), 0) << DtypeName(dtype);
    }
    // Tensor cores (or an MXU) only add speed: no dtype is slower than fp32.
    EXPECT_GE(d.tf32_flops, d.fp32_flops);
    EXPECT_GE(d.half_flops, d.tf32_flops);
    EXPECT_EQ(d.PeakFlops(Dtype::kFp16), d.PeakFlops(Dtype::kBf16));
    EXPECT_GT(d.memory_bandwidth, 0);
    EXPECT_GT(d.memory_bytes, 0);
    EXPECT_GT(d.launch_overhead_s, 0);
    EXPECT_GE(d.kernel_floor_s, 0);
    EXPECT_GT(d.gemm_efficiency, 0);
    EXPECT_LE(d.gemm_efficiency, 1);
    EXPECT_GT(d.bandwidth_efficiency, 0);
    EXPECT_LE(d.bandwidth_efficiency, 1);
    if (d.sm_count > 0) {
      // A GPU's kernel profile: half precision without tensor cores is no
      // faster than with them, and its executor overlaps comm with compute.
      EXPECT_GT(d.simt_half_flops, 0);
      EXPECT_LE(d.simt_half_flops, d.half_flops);
      EXPECT_FALSE(d.comm_on_compute);
      // Its host time per eager kernel (a CUDA launch and kOpsPerKernel
      // framework ops) is the catalogue's 40 us, the launch a share of it.
      EXPECT_NEAR(d.kernel_launch_s + kOpsPerKernel * d.launch_overhead_s, 40e-6, 1e-12);
      EXPECT_GT(d.kernel_launch_s, 0);
      EXPECT_LT(d.kernel_launch_s, d.launch_overhead_s);
    }
    EXPECT_TRUE(SameTiming(d, d));
  }
}

// Vendors' data sheets as printed (TFLOPS, GB/s, GB). `sparse`: the sheet's
// tensor figures assume 2:4 structured sparsity, twice the dense rate the
// catalogue keeps. `cores`: the sheet is per chip and the catalogue per core.
// 0: the sheet gives no such figure.
struct DataSheet {
  const char* device;
  const char* source;
  double fp32_tflops, tf32_tflops, half_tflops;
  bool sparse;
  int cores;
  double bandwidth_gb_s, capacity_gb;
};

const DataSheet kDataSheets[] = {
    {"P100-PCIe", "NVIDIA Tesla P100 data sheet (PCIe 16 GB)", 9.3, 0, 18.7, false, 1, 732, 16},
    {"P100-SXM2", "NVIDIA Tesla P100 data sheet (SXM2)", 10.6, 0, 21.2, false, 1, 732, 16},
    {"V100", "NVIDIA Tesla V100 data sheet (SXM2 32 GB)", 15.7, 0, 125, false, 1, 900, 32},
    {"A100-40GB", "NVIDIA A100 Tensor Core GPU data sheet (SXM 40 GB)", 19.5, 312, 624, true, 1, 1555, 40},
    {"A100-80GB", "NVIDIA A100 Tensor Core GPU data sheet (SXM 80 GB)", 19.5, 312, 624, true, 1, 2039, 80},
    {"H100-SXM", "NVIDIA H100 Tensor Core GPU data sheet (SXM)", 67, 989, 1979, true, 1, 3350, 80},
    {"H100-PCIe", "NVIDIA H100 Tensor Core GPU data sheet (PCIe)", 51, 756, 1513, true, 1, 2000, 80},
    {"H200", "NVIDIA H200 Tensor Core GPU data sheet (SXM)", 67, 989, 1979, true, 1, 4800, 141},
    {"TPUv2", "Cloud TPU documentation, TPU v2 (per chip, two cores)", 0, 0, 45, false, 2, 600, 16},
    {"TPUv3", "Cloud TPU documentation, TPU v3 (per chip, two cores)", 0, 0, 123, false, 2, 900, 32},
};

TEST(Catalogue, DevicesFollowTheirDataSheets) {
  for (const DataSheet& sheet : kDataSheets) {
    SCOPED_TRACE(fmt::format("{} ({})", sheet.device, sheet.source));
    const Device* d = FindDevice(sheet.device);
    ASSERT_NE(d, nullptr);
    const double dense = sheet.sparse ? 2 : 1;
    // Within the rounding of the sheet's last printed digit.
    auto expect_near = [](double got, double sheet_figure, const char* what) {
      EXPECT_NEAR(got, sheet_figure, 1e-3 * sheet_figure) << what;
    };
    expect_near(d->half_flops * sheet.cores, sheet.half_tflops * kT / dense, "fp16/bf16 peak, dense");
    if (sheet.fp32_tflops > 0) {
      expect_near(d->fp32_flops * sheet.cores, sheet.fp32_tflops * kT, "fp32 peak");
      // The precisions' ratios are the sheet's.
      expect_near(d->half_flops / d->fp32_flops, sheet.half_tflops / dense / sheet.fp32_tflops, "fp16 : fp32");
    }
    if (sheet.tf32_tflops > 0) {
      expect_near(d->half_flops / d->tf32_flops, sheet.half_tflops / sheet.tf32_tflops, "fp16 : tf32");
    } else {
      EXPECT_EQ(d->tf32_flops, d->fp32_flops) << "no TF32: the fp32 path";
    }
    // The peak bandwidth the sheet gives; kernels reach bandwidth_efficiency of it.
    expect_near(d->memory_bandwidth * sheet.cores, sheet.bandwidth_gb_s * kG, "memory bandwidth");
    // A sheet's GB, read as 10^9 or 2^30 bytes.
    EXPECT_GE(d->memory_bytes * sheet.cores, sheet.capacity_gb * kG * (1 - 1e-12));
    EXPECT_LE(d->memory_bytes * sheet.cores, sheet.capacity_gb * 1024 * 1024 * 1024 * (1 + 1e-12));
  }
}

TEST(Catalogue, EveryLinkIsConsistent) {
  for (const Link& l : LinkCatalogue()) {
    SCOPED_TRACE(l.name);
    EXPECT_GT(l.bandwidth, 0);
    EXPECT_GT(l.latency_s, 0);
    EXPECT_LT(l.latency_s, 1e-3);
    EXPECT_GT(l.collective_efficiency, 0);
    EXPECT_LE(l.collective_efficiency, 1);
    EXPECT_GE(l.collective_latency_s, 0);
    // Host-staged links share the host's memory path; the rest never do.
    const bool staged = l.name.ends_with("-host-staged");
    EXPECT_EQ(l.host_staged, staged);
    EXPECT_EQ(l.contention == Contention::kHost, staged);
    if (staged) {
      // Each hop runs at its peer-to-peer generation's rate and latency.
      const Link* p2p = FindLink(l.name.substr(0, l.name.size() - std::string_view("-host-staged").size()));
      ASSERT_NE(p2p, nullptr);
      EXPECT_EQ(l.bandwidth, p2p->bandwidth);
      EXPECT_EQ(l.latency_s, p2p->latency_s);
    }
  }
}

TEST(Catalogue, LinksGetFasterWithEachGeneration) {
  const std::vector<std::vector<const char*>> generations = {
      {"pcie3", "pcie4", "pcie5"},
      {"pcie3-host-staged", "pcie4-host-staged", "pcie5-host-staged"},
      {"nvlink1", "nvlink2", "nvlink3", "nvlink4"},
      {"ib-hdr", "ib-ndr"},
  };
  for (const auto& family : generations) {
    for (size_t k = 1; k < family.size(); ++k) {
      EXPECT_LT(FindLink(family[k - 1])->bandwidth, FindLink(family[k])->bandwidth) << family[k];
    }
  }
}

// Published per-direction peaks (GB/s) and what the catalogue keeps of them.
struct LinkSheet {
  const char* link;
  const char* source;
  double peak_gb_s;  // per direction
  double least_fraction;  // the catalogue's figure is at least this fraction of the peak (1: the peak itself)
};

const LinkSheet kLinkSheets[] = {
    // PCI-SIG base specifications: x16 after encoding, 15.75 / 31.5 / 63 GB/s per
    // direction; DMA reaches 70 to 90% of it in peer-copy measurements.
    {"pcie3", "PCI Express 3.0 base specification (x16)", 15.75, 0.7},
    {"pcie4", "PCI Express 4.0 base specification (x16)", 31.5, 0.7},
    {"pcie5", "PCI Express 5.0 base specification (x16)", 63, 0.7},
    // NVIDIA P100 / V100 / A100 / H100 data sheets: 160 / 300 / 600 / 900 GB/s
    // of NVLink per GPU, both directions together.
    {"nvlink1", "NVIDIA Tesla P100 data sheet (NVLink 160 GB/s bidirectional)", 160.0 / 2, 1},
    {"nvlink2", "NVIDIA Tesla V100 data sheet (NVLink 300 GB/s bidirectional)", 300.0 / 2, 1},
    {"nvlink3", "NVIDIA A100 data sheet (NVLink 600 GB/s bidirectional)", 600.0 / 2, 1},
    {"nvlink4", "NVIDIA H100 data sheet (NVLink 900 GB/s bidirectional)", 900.0 / 2, 1},
    // NVIDIA ConnectX-6 / ConnectX-7 product briefs: 200 / 400 Gb/s per port.
    {"ib-hdr", "NVIDIA ConnectX-6 product brief (HDR 200 Gb/s)", 200.0 / 8, 1},
    {"ib-ndr", "NVIDIA ConnectX-7 product brief (NDR 400 Gb/s)", 400.0 / 8, 1},
    // Jouppi et al., "A Domain-Specific Supercomputer for Training Deep Neural
    // Networks", CACM 2020: 656 Gb/s per ICI link on TPU v3.
    {"tpu-ici", "Jouppi et al., CACM 2020 (ICI 656 Gb/s per link)", 656.0 / 8, 1},
};

TEST(Catalogue, LinksAreWithinTheirPublishedPeaks) {
  for (const LinkSheet& sheet : kLinkSheets) {
    SCOPED_TRACE(fmt::format("{} ({})", sheet.link, sheet.source));
    const Link* l = FindLink(sheet.link);
    ASSERT_NE(l, nullptr);
    EXPECT_LE(l->bandwidth, sheet.peak_gb_s * kG * (1 + 1e-12));
    EXPECT_GE(l->bandwidth, sheet.peak_gb_s * kG * sheet.least_fraction * (1 - 1e-12));
  }
}

// Every field of a device, for comparing two of them.
auto Fields(const Device& d) {
  return std::tie(d.fp32_flops, d.tf32_flops, d.half_flops, d.memory_bandwidth, d.memory_bytes, d.launch_overhead_s,
                  d.kernel_floor_s, d.sm_count, d.simt_half_flops, d.gemm_efficiency, d.bandwidth_efficiency,
                  d.comm_on_compute, d.fp8_flops, d.fp8_gemm_ratio, d.kernel_launch_s, d.drift,
                  d.overlap_interference, d.epilogue_store);
}
auto Fields(const Link& l) {
  return std::tie(l.latency_s, l.bandwidth, l.host_staged, l.contention, l.collective_efficiency,
                  l.collective_latency_s);
}

// Each catalogue entry written as a custom device and link (every field, fmt's
// shortest exact form) reads back as the same entry.
TEST(Catalogue, EveryEntryRoundTripsThroughTheConfigAsACustomOne) {
  for (const Device& d : DeviceCatalogue()) {
    for (const Link& l : LinkCatalogue()) {
      const std::string cluster = fmt::format(
          R"("device": "my {0}", "link": "my {13}",
             "custom_devices": [{{"name": "my {0}", "fp32_flops": {1}, "tf32_flops": {2}, "half_flops": {3},
               "memory_bandwidth": {4}, "memory_bytes": {5}, "launch_overhead_s": {6}, "kernel_floor_s": {7},
               "sm_count": {8}, "simt_half_flops": {9}, "gemm_efficiency": {10}, "bandwidth_efficiency": {11},
               "comm_on_compute": {12}, "fp8_flops": {20}, "fp8_gemm_ratio": {21}, "kernel_launch_s": {22},
               "drift": {23}, "overlap_interference": {24}, "epilogue_store": {25}}}],
             "custom_links": [{{"name": "my {13}", "latency_s": {14}, "bandwidth": {15}, "host_staged": {16},
               "contention": "{17}", "collective_efficiency": {18}, "collective_latency_s": {19}}}])",
          d.name, d.fp32_flops, d.tf32_flops, d.half_flops, d.memory_bandwidth, d.memory_bytes, d.launch_overhead_s,
          d.kernel_floor_s, d.sm_count, d.simt_half_flops, d.gemm_efficiency, d.bandwidth_efficiency,
          d.comm_on_compute, l.name, l.latency_s, l.bandwidth, l.host_staged, ContentionName(l.contention),
          l.collective_efficiency, l.collective_latency_s, d.fp8_flops, d.fp8_gemm_ratio, d.kernel_launch_s,
          d.drift, d.overlap_interference, d.epilogue_store);
      auto c = WithCluster(cluster);
      ASSERT_TRUE(c) << d.name << " / " << l.name << ": " << c.error().message;
      const Device& read = c->cluster.devices[0];
      EXPECT_EQ(read.name, "my " + d.name);
      EXPECT_TRUE(Fields(read) == Fields(d)) << d.name;
      EXPECT_EQ(c->cluster.link.name, "my " + l.name);
      EXPECT_TRUE(Fields(c->cluster.link) == Fields(l)) << l.name;
    }
  }
}

}  // namespace
}  // namespace twinpipe::cost
