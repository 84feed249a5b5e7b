// Tied weights across pipeline stages (layers/layer.h's Tie): the token
// embedding (stage 0) keeps the original table and the head (the last stage)
// a copy, as Megatron-LM's first and last pipeline stages each do. At STEP,
// after the replicas' all-reduces, both gradients become original + copy,
// summed in that order, so both apply the same update and stay equal
// wherever the two stages run: on one device the sum is local; otherwise the
// two devices of each replica meet here (threads of one process, or two MPI
// ranks), and get the same bits as the local sum.
//
//   TiedGradients tied(schedule, /*mpi=*/false, /*rank=*/-1);
//   SyncStatus st = tied.Sum(replica, device_params, deadline);   // at STEP
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "execute/layers/layer.h"
#include "execute/sync.h"
#include "ir/schedule.h"

namespace twinpipe::execute {

class TiedGradients {
 public:
  using Clock = std::chrono::steady_clock;
  // Under MPI every rank constructs one (it makes a communicator of the two
  // holders of each replica); `rank` is this rank.
  TiedGradients(const ir::Schedule& schedule, bool mpi, int rank);
  // The tied parameters among a device's `params` (none, one or both): each
  // one's gradient becomes the sum of both.
  SyncStatus Sum(int replica, const std::vector<Param*>& params, Clock::time_point deadline);
  // The exchange alone, for a backend that keeps its gradients elsewhere:
  // `grad` (this side's, `side` kOriginal or kCopy) becomes original + copy.
  // Only where the two stages are on different devices.
  SyncStatus Exchange(int replica, Tie side, std::vector<double>& grad, Clock::time_point deadline);
  void Abort();

 private:
  bool mpi_;
  // Per replica in one process (party 0 holds the original, 1 the copy);
  // one under MPI (this rank's pair, or none).
  std::vector<std::unique_ptr<ReplicaAverager>> pairs_;
};

}  // namespace twinpipe::execute
