// Communication costs: a point-to-point transfer over a link (alpha-beta:
// latency + bytes / bandwidth; a host-staged transfer is a device-to-host
// copy then a host-to-device copy), and a collective over a group of GPUs
// as NCCL runs it: a ring, or for an all-reduce across nodes a tree when
// that is faster (NCCL's own tuning model picks the faster algorithm).
//
//   double t = TransferTime(*FindLink("pcie3-host-staged"), 1 << 20);
//   double ar = CollectiveTime(Kernel::Collective::kAllReduce, 1e9,
//                              {.ranks = 64, .nodes = 8, .intra = nvlink, .inter = ib});
#pragma once

#include "cost_models/catalogue.h"
#include "cost_models/model.h"

namespace twinpipe::cost {

// Seconds to move `bytes` one way over an idle link. Every message pays the
// latency, an empty one too.
double TransferTime(const Link& link, double bytes);

// Seconds from the start of an idle pipeline transfer of `bytes` per GPU
// over `link` until the receivers hold the boundary: the transfer, then,
// where each of a t-GPU tensor-parallel group sends 1/t of it (Megatron's
// scatter-gather without sequence parallelism: gather_ranks = t), their
// ring all-gather of the whole boundary over `gather_link`, the link inside
// their node. The simulator and the partitioner charge a cut this.
double BoundaryTransferTime(const Link& link, double bytes, int gather_ranks, const Link& gather_link);
// That all-gather alone (0 where gather_ranks <= 1).
double BoundaryGatherTime(double bytes, int gather_ranks, const Link& gather_link);

// Where a collective's ranks sit: `ranks` GPUs spread evenly over `nodes`
// nodes, joined by `intra` inside a node and by `inter` between nodes
// (unused while nodes is 1).
struct CollectiveGroup {
  double ranks = 1;
  double nodes = 1;
  const Link* intra = nullptr;
  const Link* inter = nullptr;
  // An NCCL collective crosses between nodes on a rail per GPU of the group
  // in a node (where `inter` is a NIC per GPU); false: a ring of point-to-
  // point sends, each crossing pair on one NIC (Transformer Engine's
  // context-parallel K/V exchange).
  bool rails = true;
};

// Seconds of a collective of `bytes` (each rank's buffer) over the group.
// Ring: (n-1)/n of the bytes at the achievable bus bandwidth
// (`collective_efficiency` x bandwidth) of the intra-node link or, across
// nodes, of the inter-node link, times the group's ranks per node where
// that link is a NIC per GPU (Contention::kPerDevice) and the group's
// `rails` are used (NCCL's channels cross between nodes on every NIC the
// group's GPUs have), whichever is less; one step per rank, each step
// paying its link's latency; an all-reduce is a reduce-scatter then an
// all-gather.
// Tree (all-reduce only, NCCL's double binary tree): all the bytes up and
// down, at 0.9 of that bus bandwidth (NCCL's tree factor), with
// 2 (ranks per node - 1) intra-node and 2 floor(log2 nodes) inter-node
// latencies. The all-reduce takes the faster of the two, as NCCL does:
// the tree wins only for small buffers over many nodes.
double CollectiveTime(Kernel::Collective kind, double bytes, const CollectiveGroup& group);

// The same inside one node, every rank on `link`.
inline double CollectiveTime(Kernel::Collective kind, double bytes, double ranks, const Link& link) {
  return CollectiveTime(kind, bytes, {.ranks = ranks, .nodes = 1, .intra = &link, .inter = &link});
}

}  // namespace twinpipe::cost
