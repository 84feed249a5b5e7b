#include "cost_models/catalogue.h"

#include <gtest/gtest.h>

namespace twinpipe::cost {
namespace {

TEST(Catalogue, HasEveryDesignName) {
  for (const char* name : {"P100-PCIe", "P100-SXM2", "V100", "A100-40GB", "A100-80GB", "H100-SXM",
                           "H100-PCIe", "H200", "TPUv2", "TPUv3", "CPU"}) {
    const Device* d = FindDevice(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_GT(d->fp32_flops, 0) << name;
    EXPECT_GE(d->tf32_flops, d->fp32_flops) << name;
    EXPECT_GE(d->half_flops, d->fp32_flops) << name;
    EXPECT_GT(d->memory_bandwidth, 0) << name;
    EXPECT_GT(d->memory_bytes, 0) << name;
  }
  for (const char* name : {"pcie3", "pcie4", "pcie5", "pcie3-host-staged", "pcie4-host-staged",
                           "pcie5-host-staged", "nvlink1", "nvlink2", "nvlink3", "nvlink4", "ib-hdr",
                           "ib-ndr", "tpu-ici", "inproc"}) {
    const Link* l = FindLink(name);
    ASSERT_NE(l, nullptr) << name;
    EXPECT_GT(l->bandwidth, 0) << name;
    EXPECT_GT(l->latency_s, 0) << name;
  }
}

TEST(Catalogue, LookupIgnoresCase) {
  EXPECT_EQ(FindDevice("h100-sxm"), FindDevice("H100-SXM"));
  EXPECT_EQ(FindLink("NVLINK4"), FindLink("nvlink4"));
  EXPECT_EQ(FindDevice("H300"), nullptr);
}

TEST(Catalogue, FiguresFollowTheDataSheets) {
  EXPECT_DOUBLE_EQ(FindDevice("A100-80GB")->PeakFlops(Dtype::kBf16), 312e12);
  EXPECT_DOUBLE_EQ(FindDevice("A100-80GB")->PeakFlops(Dtype::kTf32), 156e12);
  EXPECT_DOUBLE_EQ(FindDevice("V100")->PeakFlops(Dtype::kFp16), 125e12);
  EXPECT_DOUBLE_EQ(FindDevice("P100-PCIe")->PeakFlops(Dtype::kTf32), 9.3e12);  // no TF32: fp32 path
  // Only the CPU backend runs its sends and receives between compute ops.
  for (const Device& d : DeviceCatalogue()) EXPECT_EQ(d.comm_on_compute, d.name == "CPU") << d.name;
  EXPECT_TRUE(FindLink("pcie3-host-staged")->host_staged);
  EXPECT_EQ(FindLink("pcie3-host-staged")->contention, Contention::kHost);
  EXPECT_LT(FindLink("nvlink1")->bandwidth, FindLink("nvlink4")->bandwidth);
}

}  // namespace
}  // namespace twinpipe::cost
