#include "execute/transport.h"

#include <algorithm>

namespace twinpipe::execute {

InProcTransport::InProcTransport(int devices, size_t capacity, std::chrono::microseconds spin)
    : devices_(devices), capacity_(capacity), spin_(spin) {
  channels_.resize(static_cast<size_t>(devices) * devices);
  for (auto& c : channels_) c = std::make_unique<Channel>();
}

InProcTransport::Status InProcTransport::Send(int src, int dst, Message message, Clock::time_point deadline) {
  Channel& c = At(src, dst);
  std::unique_lock lock(c.mu);
  const bool ready = c.cv.wait_until(lock, deadline, [&] {
    std::lock_guard g(abort_mu_);
    return aborted_ || c.queue.size() < capacity_;
  });
  {
    std::lock_guard g(abort_mu_);
    if (aborted_) return Status::kAborted;
  }
  if (!ready) return Status::kTimeout;
  c.queue.push_back(std::move(message));
  c.size.store(c.queue.size(), std::memory_order_release);
  c.cv.notify_all();
  return Status::kOk;
}

InProcTransport::Status InProcTransport::Recv(int src, int dst, Message& out, Clock::time_point deadline) {
  Channel& c = At(src, dst);
  if (spin_.count() > 0 && c.size.load(std::memory_order_acquire) == 0) {
    const auto until = std::min(deadline, Clock::now() + spin_);
    while (c.size.load(std::memory_order_acquire) == 0 && Clock::now() < until) {
    }
  }
  std::unique_lock lock(c.mu);
  const bool ready = c.cv.wait_until(lock, deadline, [&] {
    std::lock_guard g(abort_mu_);
    return aborted_ || !c.queue.empty();
  });
  {
    std::lock_guard g(abort_mu_);
    if (aborted_) return Status::kAborted;
  }
  if (!ready) return Status::kTimeout;
  out = std::move(c.queue.front());
  c.queue.pop_front();
  c.size.store(c.queue.size(), std::memory_order_release);
  c.cv.notify_all();
  return Status::kOk;
}

void InProcTransport::Abort() {
  {
    std::lock_guard g(abort_mu_);
    aborted_ = true;
  }
  for (auto& c : channels_) {
    std::lock_guard lock(c->mu);
    c->cv.notify_all();
  }
}

}  // namespace twinpipe::execute
