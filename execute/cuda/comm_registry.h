// The communicators of one device (NCCL's, in the CUDA backend), and the
// rule for aborting them from another thread: one per peer the device sends
// to, one per peer it receives from, and one joining its replicas. Filled
// once before the workers start and never changed after. A failure anywhere
// calls Abort, from whichever thread failed, while this device's worker may
// be using a communicator; NCCL lets one thread at a time operate a
// communicator, so an abort never overlaps a use: Abort marks the registry
// aborted (later uses are refused) and aborts every communicator at once if
// none is in use, else the last use to leave does. The entries stay; the
// owner destroys the communicators that were not aborted (an abort frees
// its own) when no worker is left. Needs no GPU: the calls are injected.
//
//   CommRegistry<ncclComm_t> comms(AbortComm, DestroyComm);   // setup: comms.Add(CommRole::kSend, 1, c)
//   if (!comms.Use(CommRole::kSend, 1, [&](ncclComm_t c) { ncclSend(..., c, stream); })) throw Aborted();
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace twinpipe::execute::cuda {

enum class CommRole { kSend, kRecv, kReplica };

template <typename Comm>
class CommRegistry {
 public:
  using Call = std::function<void(Comm)>;

  CommRegistry(Call abort, Call destroy) : abort_(std::move(abort)), destroy_(std::move(destroy)) {}
  CommRegistry(const CommRegistry&) = delete;
  CommRegistry& operator=(const CommRegistry&) = delete;
  ~CommRegistry() { Destroy(); }

  // Setup, before any thread uses the registry. `peer`: the pipeline device
  // at the other end (0 for the replicas' communicator).
  void Add(CommRole role, int peer, Comm comm) { comms_[{role, peer}] = comm; }

  // Runs use(communicator of role and peer) unless the registry was aborted,
  // then returns false without running it; no abort runs meanwhile. Throws
  // std::out_of_range when there is no such communicator.
  template <typename F>
  bool Use(CommRole role, int peer, F&& use) {
    const auto it = comms_.find({role, peer});  // no lock: fixed after setup
    if (it == comms_.end()) throw std::out_of_range(Missing(role, peer));
    {
      std::lock_guard lock(mu_);
      if (aborted_) return false;
      ++users_;
    }
    struct Leave {  // also when `use` throws
      CommRegistry& registry;
      ~Leave() {
        std::lock_guard lock(registry.mu_);
        if (--registry.users_ == 0 && registry.aborted_) registry.AbortLocked();
      }
    } leave{*this};
    std::forward<F>(use)(it->second);
    return true;
  }

  // Any thread, any number of times.
  void Abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    if (users_ == 0) AbortLocked();
  }
  bool aborted() const { return aborted_; }

  // The owner, once no thread uses the registry (a second call does nothing).
  void Destroy() {
    std::lock_guard lock(mu_);
    if (released_) return;
    for (const auto& [key, comm] : comms_) destroy_(comm);
    released_ = true;
  }

 private:
  void AbortLocked() {
    if (released_) return;
    for (const auto& [key, comm] : comms_) abort_(comm);
    released_ = true;
  }
  static std::string Missing(CommRole role, int peer) {
    if (role == CommRole::kReplica) return "no replica communicator";
    return "no " + std::string(role == CommRole::kSend ? "send" : "receive") + " communicator for device " +
           std::to_string(peer);
  }

  Call abort_, destroy_;
  std::map<std::pair<CommRole, int>, Comm> comms_;
  std::mutex mu_;
  int users_ = 0;                     // calls inside Use now
  bool released_ = false;             // aborted or destroyed: the handles are gone
  std::atomic<bool> aborted_{false};  // written under mu_; read by aborted() without it
};

}  // namespace twinpipe::execute::cuda
