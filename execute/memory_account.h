// Accounting of the bytes a device's tensors hold, with a timestamped sample
// at every change and the peak: the executor's memory timeline.
//
//   MemoryAccount account(clock_start);
//   account.Add(4096); account.Sub(4096); account.peak_bytes();
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace twinpipe::execute {

class MemoryAccount {
 public:
  using Clock = std::chrono::steady_clock;

  // One account per device, used by that device's worker thread only.
  void Reset(Clock::time_point origin) {
    origin_ = origin;
    samples_.clear();
    samples_.emplace_back(0.0, static_cast<double>(bytes_));
    peak_ = bytes_;
  }
  void Add(int64_t bytes) { Change(bytes); }
  void Sub(int64_t bytes) { Change(-bytes); }

  int64_t bytes() const { return bytes_; }
  int64_t peak_bytes() const { return peak_; }
  const std::vector<std::pair<double, double>>& samples() const { return samples_; }

 private:
  void Change(int64_t delta) {
    bytes_ += delta;
    if (bytes_ > peak_) peak_ = bytes_;
    const double t = std::chrono::duration<double>(Clock::now() - origin_).count();
    if (!samples_.empty() && samples_.back().first == t) {
      samples_.back().second = static_cast<double>(bytes_);
    } else {
      samples_.emplace_back(t, static_cast<double>(bytes_));
    }
  }

  Clock::time_point origin_ = Clock::now();
  int64_t bytes_ = 0;
  int64_t peak_ = 0;
  std::vector<std::pair<double, double>> samples_;
};

}  // namespace twinpipe::execute
