// Transports carry the activations and gradients between devices, FIFO per
// ordered device pair. A receive blocks until its message arrives, the run
// aborts, or its deadline passes; it never hangs. InProcTransport joins the
// worker threads of one process (a bounded channel per pair); MpiTransport
// (execute/mpi.h) joins processes.
//
//   InProcTransport t(/*devices=*/4, /*capacity=*/64);
//   t.Send(0, 1, std::move(message), deadline);  t.Recv(0, 1, m, deadline);
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/op.h"

namespace twinpipe::execute {

struct Message {
  ir::OpKind kind;  // SEND_F or SEND_B
  int32_t stage;    // the sending stage
  int32_t micro_batch;
  int rows = 0, cols = 0;
  std::vector<float> data;
  // In one process, what a GPU transport hands over besides the header
  // (device buffer, pinned copy, events: execute/cuda/runtime.cc); null on
  // the CPU backend and over MPI.
  std::shared_ptr<void> handle;
};

class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Status { kOk, kTimeout, kAborted };
  virtual ~Transport() = default;
  virtual Status Send(int src, int dst, Message message, Clock::time_point deadline) = 0;
  virtual Status Recv(int src, int dst, Message& out, Clock::time_point deadline) = 0;
  // Wakes every waiting send and receive; they return kAborted.
  virtual void Abort() = 0;
};

class InProcTransport : public Transport {
 public:
  // A receive polls for up to `spin` before it sleeps: waking a sleeping
  // thread costs tens of microseconds on a virtual machine, per message.
  // Worth it only while every device has a core of its own.
  InProcTransport(int devices, size_t capacity, std::chrono::microseconds spin = std::chrono::microseconds(0));
  Status Send(int src, int dst, Message message, Clock::time_point deadline) override;
  Status Recv(int src, int dst, Message& out, Clock::time_point deadline) override;
  void Abort() override;

 private:
  struct Channel {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Message> queue;
    std::atomic<size_t> size{0};  // queue.size(), readable without the lock
  };
  Channel& At(int src, int dst) { return *channels_[static_cast<size_t>(src) * devices_ + dst]; }

  int devices_;
  size_t capacity_;
  std::chrono::microseconds spin_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::mutex abort_mu_;
  bool aborted_ = false;
};

}  // namespace twinpipe::execute
