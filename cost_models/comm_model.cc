#include "cost_models/comm_model.h"

#include <algorithm>
#include <cmath>

namespace twinpipe::cost {

double TransferTime(const Link& link, double bytes) {
  const double one_copy = link.latency_s + std::max(bytes, 0.0) / link.bandwidth;
  return link.host_staged ? 2 * one_copy : one_copy;
}

double BoundaryGatherTime(double bytes, int gather_ranks, const Link& gather_link) {
  if (gather_ranks <= 1) return 0;
  const double t = gather_ranks;
  return CollectiveTime(Kernel::Collective::kAllGather, bytes * t, t, gather_link);
}

double BoundaryTransferTime(const Link& link, double bytes, int gather_ranks, const Link& gather_link) {
  return TransferTime(link, bytes) + BoundaryGatherTime(bytes, gather_ranks, gather_link);
}

double CollectiveTime(Kernel::Collective kind, double bytes, const CollectiveGroup& g) {
  const double n = g.ranks;
  if (kind == Kernel::Collective::kNone || n <= 1) return 0;
  const double nodes = std::clamp(g.nodes, 1.0, n);
  const Link& inter = nodes > 1 && g.inter ? *g.inter : *g.intra;
  // Across nodes NCCL runs a channel per rail: each of the group's GPUs in a
  // node carries a share of the ring's crossing through its own NIC, so the
  // ring crosses at (ranks per node) x the inter-node link's rate, as long
  // as the intra-node link keeps up (two DGX H100s with 8 NDR NICs reach
  // about 470 GB/s of all-reduce bus bandwidth, a NIC 46-48 GB/s: NVIDIA/
  // nccl issue 2409, nccl-tests issue 290). A link shared by a host, or a
  // ring of point-to-point sends, crosses on one.
  const double local = n / nodes;
  const double rails = g.rails && inter.contention == Contention::kPerDevice ? local : 1;
  const double intra_bus = g.intra->bandwidth * g.intra->collective_efficiency;
  const double bus_bandwidth =
      nodes > 1 ? std::min(intra_bus, rails * inter.bandwidth * inter.collective_efficiency) : intra_bus;
  const double phases = kind == Kernel::Collective::kAllReduce ? 2 : 1;
  const double fixed = std::max(g.intra->collective_latency_s, nodes > 1 ? inter.collective_latency_s : 0.0);
  if (kind == Kernel::Collective::kAllToAll) {
    // Each rank keeps 1/n of its buffer and sends 1/n to each other rank at
    // once: those of its node over `intra`, the others over `inter` (its own
    // NIC), the two side by side; a step's latency per peer link crossed.
    const double intra_s = (local - 1) / n * bytes / (g.intra->bandwidth * g.intra->collective_efficiency);
    const double inter_s = nodes > 1 ? (n - local) / n * bytes / (inter.bandwidth * inter.collective_efficiency) : 0;
    return fixed + std::max(intra_s, inter_s) + (local - 1) * g.intra->latency_s + (n - local) * inter.latency_s;
  }
  // Ring: n - 1 steps a phase, nodes - 1 of them crossing between nodes.
  const double ring = fixed + phases * ((n - 1) / n * bytes / bus_bandwidth + (n - nodes) * g.intra->latency_s +
                                        (nodes - 1) * inter.latency_s);
  // Inside one node the tree is a chain: the ring's latency at less bandwidth.
  if (kind != Kernel::Collective::kAllReduce || nodes == 1) return ring;
  // NCCL's tree: a chain inside each node, a binary tree between nodes.
  constexpr double kTreeBandwidthFactor = 0.9;
  const double tree = fixed + 2 * bytes / (kTreeBandwidthFactor * bus_bandwidth) +
                      2 * ((n / nodes - 1) * g.intra->latency_s + std::floor(std::log2(nodes)) * inter.latency_s);
  return std::min(ring, tree);
}

}  // namespace twinpipe::cost
