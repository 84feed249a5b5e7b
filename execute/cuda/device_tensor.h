// A 2-D fp32 tensor in GPU memory (rows x cols, row-major), allocated with
// the stream-ordered allocator and counted in its device's MemoryAccount for
// as long as any view of it lives; or a bf16 one (Element::kBf16, read
// through bf16(): a BF16 GEMM's operand converted once for several products,
// bf16.h). Tensors are immutable once their kernel has written them, so
// copies share storage (views, saved activations).
// Storage is freed on the stream set by FreeOn (the stream that allocated it
// by default), ordered after the work that stream has queued.
//
//   DeviceTensor y(&account, stream, 8, 64);   // uninitialised
//   DeviceTensor rows = y.Rows(2, 4);          // rows 2..5, same storage
//   DeviceTensor y16(&account, stream, 8, 64, Element::kBf16);  // 2 bytes an element
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cassert>
#include <cstdint>
#include <memory>

#include "execute/memory_account.h"

namespace twinpipe::execute::cuda {

enum class Element { kFp32, kBf16 };

class DeviceTensor {
 public:
  DeviceTensor() = default;
  // `account` may be null (data buffers the executor does not count).
  DeviceTensor(MemoryAccount* account, cudaStream_t stream, int rows, int cols, Element element = Element::kFp32);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  Element element() const { return element_; }
  int64_t size() const { return static_cast<int64_t>(rows_) * cols_; }
  int64_t bytes() const { return size() * ElementBytes(); }
  bool empty() const { return storage_ == nullptr; }
  float* data() const {
    assert(element_ == Element::kFp32);
    return static_cast<float*>(data_);
  }
  __nv_bfloat16* bf16() const {
    assert(element_ == Element::kBf16);
    return static_cast<__nv_bfloat16*>(data_);
  }

  DeviceTensor Rows(int first, int count) const;
  // The stream the storage will be freed on: one that is ordered after every
  // use of it (a consumer that waited on the producer's event).
  void FreeOn(cudaStream_t stream) const;
  void Release() { *this = DeviceTensor(); }

 private:
  int64_t ElementBytes() const { return element_ == Element::kBf16 ? 2 : 4; }

  struct Storage;
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  int rows_ = 0, cols_ = 0;
  Element element_ = Element::kFp32;
};

// A GPU array of n T owned alone (cudaMalloc, freed with it): zeroed, or
// left uninitialised for what a stream writes whole before anything reads
// it (a zeroing cudaMemset would run on the legacy stream, unordered with
// the backend's non-blocking streams).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(int64_t n, bool zeroed);
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceArray& operator=(DeviceArray&& o) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray();
  T* get() const { return p_; }
  int64_t size() const { return n_; }
  bool empty() const { return p_ == nullptr; }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

// n floats, zeroed (parameters, gradients, optimizer state).
class DeviceBuffer : public DeviceArray<float> {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n) : DeviceArray(n, /*zeroed=*/true) {}
};

// n bf16 values, uninitialised: a weight's bf16 copy (bf16.h).
class DeviceBf16Buffer : public DeviceArray<__nv_bfloat16> {
 public:
  DeviceBf16Buffer() = default;
  explicit DeviceBf16Buffer(int64_t n) : DeviceArray(n, /*zeroed=*/false) {}
};

}  // namespace twinpipe::execute::cuda
