#include "execute/sync.h"

#include <algorithm>

#include <fmt/format.h>

namespace twinpipe::execute {

SyncStatus StepBarrier::Arrive(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (aborted_) return SyncStatus::kAborted;
  const int64_t generation = generation_;
  if (++arrived_ == parties_) {
    if (on_open_) on_open_();
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return SyncStatus::kOk;
  }
  const bool opened = cv_.wait_until(lock, deadline, [&] { return aborted_ || generation_ != generation; });
  if (generation_ != generation) return SyncStatus::kOk;
  return opened ? SyncStatus::kAborted : SyncStatus::kTimeout;
}

void StepBarrier::Abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

HostStream::HostStream() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto job = std::move(queue_.front());
      queue_.pop_front();
      const bool skip = error_.has_value() || aborted_;
      lock.unlock();
      Result<void> ok = skip ? Result<void>{} : job();
      lock.lock();
      if (!ok && !error_) error_ = ok.error();
      --running_;
      cv_.notify_all();
    }
  });
}

HostStream::~HostStream() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HostStream::Enqueue(std::function<Result<void>()> job) {
  std::lock_guard lock(mu_);
  ++running_;
  queue_.push_back(std::move(job));
  cv_.notify_all();
}

Result<void> HostStream::Wait(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return running_ == 0 || aborted_; })) {
    return FailRuntime("timed out waiting for its all-reduces");
  }
  if (error_) {
    Error e = *error_;
    error_.reset();
    return tl::unexpected(e);
  }
  if (aborted_) return FailAborted();
  return {};
}

void HostStream::Abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void AverageInReplicaOrder(const std::vector<const double*>& buffers, size_t first, size_t last, double* out) {
  const double scale = 1.0 / static_cast<double>(buffers.size());
  for (size_t i = first; i < last; ++i) {
    double sum = 0;
    for (const double* b : buffers) sum += b[i];
    out[i] = sum * scale;
  }
}

SyncStatus InProcReplicaAverager::Average(int replica, std::vector<double>& values, Clock::time_point deadline) {
  buffers_[replica] = &values;
  // 1: every replica's values are in place.
  if (auto st = barrier_.Arrive(deadline); st != SyncStatus::kOk) return st;
  const size_t n = values.size();
  if (replica == 0) sum_.resize(n);
  // 2: replica 0 has sized the sums.
  if (auto st = barrier_.Arrive(deadline); st != SyncStatus::kOk) return st;
  std::vector<const double*> in(replicas_);
  for (int r = 0; r < replicas_; ++r) in[r] = buffers_[r]->data();
  const size_t first = n * replica / replicas_, last = n * (replica + 1) / replicas_;
  AverageInReplicaOrder(in, first, last, sum_.data());
  // 3: every slice is summed; 4: every replica has copied the sums.
  if (auto st = barrier_.Arrive(deadline); st != SyncStatus::kOk) return st;
  std::copy(sum_.begin(), sum_.end(), values.begin());
  return barrier_.Arrive(deadline);
}

}  // namespace twinpipe::execute
