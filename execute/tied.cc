#include "execute/tied.h"

#include <algorithm>

#include "execute/mpi.h"

namespace twinpipe::execute {

TiedGradients::TiedGradients(const ir::Schedule& s, bool mpi, int rank) : mpi_(mpi) {
  const int original = s.placement.front(), copy = s.placement.back(), D = s.num_devices;
  const int R = std::max(1, s.replicas);
  if (original == copy) return;  // summed where they are
  if (mpi) {
    const int device = rank % D, replica = rank / D;
    const bool member = device == original || device == copy;
    pairs_.push_back(std::make_unique<MpiReplicaAverager>(
        MpiGroup{member ? replica : -1, device == original ? 0 : 1}));
  } else {
    for (int r = 0; r < R; ++r) pairs_.push_back(std::make_unique<InProcReplicaAverager>(2));
  }
}

SyncStatus TiedGradients::Sum(int replica, const std::vector<Param*>& params, Clock::time_point deadline) {
  Param* original = nullptr;
  Param* copy = nullptr;
  for (Param* p : params) {
    if (p->tie == Tie::kOriginal) original = p;
    if (p->tie == Tie::kCopy) copy = p;
  }
  if (original && copy) {
    for (size_t i = 0; i < original->grad.size(); ++i) {
      original->grad[i] = copy->grad[i] = original->grad[i] + copy->grad[i];
    }
    return SyncStatus::kOk;
  }
  Param* mine = original ? original : copy;
  if (!mine) return SyncStatus::kOk;
  return Exchange(replica, mine->tie, mine->grad, deadline);
}

SyncStatus TiedGradients::Exchange(int replica, Tie side, std::vector<double>& grad, Clock::time_point deadline) {
  ReplicaAverager& pair = *pairs_.at(mpi_ ? 0 : static_cast<size_t>(replica));
  const auto status = pair.Average(side == Tie::kOriginal ? 0 : 1, grad, deadline);
  // (original + copy) / 2, summed in party order; doubling is exact: the local sum's bits.
  for (double& g : grad) g *= 2;
  return status;
}

void TiedGradients::Abort() {
  for (auto& p : pairs_) p->Abort();
}

}  // namespace twinpipe::execute
