// What the executor's threads synchronise with: a barrier that a failure can
// open and a deadline can end, a host "stream" that runs queued work in order
// on a thread of its own (the CPU backend's all-reduce stream), and the
// gradient averaging across data-parallel replicas, in one process or
// between MPI ranks. Averaging sums the replicas' values in replica order,
// whatever the transport, so every replica, and every run, gets the same bits.
//
//   StepBarrier b(3);  if (b.Arrive(deadline) != Status::kOk) ...
//   HostStream s;  s.Enqueue([] { ...; return Result<void>{}; });  s.Wait(deadline);
//   InProcReplicaAverager avg(/*replicas=*/2);  avg.Average(r, grads, deadline);
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "execute/transport.h"
#include "ir/result.h"

namespace twinpipe::execute {

using SyncStatus = Transport::Status;

class StepBarrier {
 public:
  using Clock = std::chrono::steady_clock;
  // `on_open` runs in the last thread to arrive, before any thread leaves.
  explicit StepBarrier(int parties, std::function<void()> on_open = {})
      : parties_(parties), on_open_(std::move(on_open)) {}
  SyncStatus Arrive(Clock::time_point deadline = Clock::time_point::max());
  void Abort();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int parties_, arrived_ = 0;
  int64_t generation_ = 0;
  bool aborted_ = false;
  std::function<void()> on_open_;
};

// Runs queued jobs in order on its own thread. A failed job fails the ones
// after it too; Wait reports the first failure.
class HostStream {
 public:
  using Clock = std::chrono::steady_clock;
  HostStream();
  ~HostStream();
  void Enqueue(std::function<Result<void>()> job);
  // Blocks until every queued job has run, the deadline passes (runtime
  // error) or Abort is called.
  Result<void> Wait(Clock::time_point deadline);
  void Abort();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<Result<void>()>> queue_;
  size_t running_ = 0;
  bool stop_ = false, aborted_ = false;
  std::optional<Error> error_;
  std::thread thread_;
};

// Averages a vector of values across the R replicas of one pipeline device;
// each replica calls Average with its own values and the same length, and
// gets back sum(replica 0..R-1) / R, summed in replica order.
class ReplicaAverager {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~ReplicaAverager() = default;
  virtual SyncStatus Average(int replica, std::vector<double>& values, Clock::time_point deadline) = 0;
  virtual void Abort() = 0;
};

// Sums `replicas` buffers of `n` values in replica order and divides: the
// one arithmetic every averager uses.
void AverageInReplicaOrder(const std::vector<const double*>& buffers, size_t first, size_t last, double* out);

// The replicas as threads of one process: each sums its slice of every
// replica's values, then copies every slice back.
class InProcReplicaAverager : public ReplicaAverager {
 public:
  explicit InProcReplicaAverager(int replicas)
      : replicas_(replicas), buffers_(replicas), barrier_(replicas) {}
  SyncStatus Average(int replica, std::vector<double>& values, Clock::time_point deadline) override;
  void Abort() override { barrier_.Abort(); }

 private:
  int replicas_;
  std::vector<std::vector<double>*> buffers_;
  std::vector<double> sum_;
  StepBarrier barrier_;
};

}  // namespace twinpipe::execute
