// A 2-D fp32 tensor in GPU memory (rows x cols, row-major), allocated with
// the stream-ordered allocator and counted in its device's MemoryAccount for
// as long as any view of it lives. Tensors are immutable once their kernel
// has written them, so copies share storage (views, saved activations).
// Storage is freed on the stream set by FreeOn (the stream that allocated it
// by default), ordered after the work that stream has queued.
//
//   DeviceTensor y(&account, stream, 8, 64);   // uninitialised
//   DeviceTensor rows = y.Rows(2, 4);          // rows 2..5, same storage
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "execute/memory_account.h"

namespace twinpipe::execute::cuda {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  // `account` may be null (data buffers the executor does not count).
  DeviceTensor(MemoryAccount* account, cudaStream_t stream, int rows, int cols);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  int64_t size() const { return static_cast<int64_t>(rows_) * cols_; }
  int64_t bytes() const { return size() * static_cast<int64_t>(sizeof(float)); }
  bool empty() const { return storage_ == nullptr; }
  float* data() const { return data_; }

  DeviceTensor Rows(int first, int count) const;
  // The stream the storage will be freed on: one that is ordered after every
  // use of it (a consumer that waited on the producer's event).
  void FreeOn(cudaStream_t stream) const;
  void Release() { *this = DeviceTensor(); }

 private:
  struct Storage;
  std::shared_ptr<Storage> storage_;
  float* data_ = nullptr;
  int rows_ = 0, cols_ = 0;
};

// A GPU buffer of n floats owned alone (parameters, optimizer state), zeroed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n);
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  float* get() const { return p_; }
  int64_t size() const { return n_; }

 private:
  float* p_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace twinpipe::execute::cuda
