#include "execute/cuda/device_tensor.h"

#include <algorithm>

#include "execute/cuda/check.h"

namespace twinpipe::execute::cuda {

struct DeviceTensor::Storage {
  void* ptr = nullptr;
  int64_t bytes = 0;
  MemoryAccount* account = nullptr;
  cudaStream_t stream = nullptr;
  ~Storage() {
    // A destructor cannot fail the run; a failed free shows up as the next
    // call's error on this device.
    if (ptr) static_cast<void>(cudaFreeAsync(ptr, stream));
    if (account) account->Sub(bytes);
  }
};

DeviceTensor::DeviceTensor(MemoryAccount* account, cudaStream_t stream, int rows, int cols, Element element)
    : storage_(std::make_shared<Storage>()), rows_(rows), cols_(cols), element_(element) {
  const int64_t n = std::max<int64_t>(1, bytes());
  void* p = nullptr;
  TP_CUDA(cudaMallocAsync(&p, static_cast<size_t>(n), stream));
  storage_->ptr = p;
  storage_->bytes = bytes();
  storage_->stream = stream;
  storage_->account = account;
  if (account) account->Add(bytes());
  data_ = storage_->ptr;
}

DeviceTensor DeviceTensor::Rows(int first, int count) const {
  DeviceTensor v = *this;
  v.data_ = static_cast<char*>(data_) + static_cast<int64_t>(first) * cols_ * ElementBytes();
  v.rows_ = count;
  return v;
}

void DeviceTensor::FreeOn(cudaStream_t stream) const {
  if (storage_) storage_->stream = stream;
}

template <typename T>
DeviceArray<T>::DeviceArray(int64_t n, bool zeroed) : n_(n) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, n)) * sizeof(T);
  void* p = nullptr;
  TP_CUDA(cudaMalloc(&p, bytes));
  p_ = static_cast<T*>(p);
  if (zeroed) TP_CUDA(cudaMemset(p_, 0, bytes));
}

template <typename T>
DeviceArray<T>& DeviceArray<T>::operator=(DeviceArray&& o) noexcept {
  if (this != &o) {
    if (p_) static_cast<void>(cudaFree(p_));
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

template <typename T>
DeviceArray<T>::~DeviceArray() {
  if (p_) static_cast<void>(cudaFree(p_));
}

template class DeviceArray<float>;
template class DeviceArray<__nv_bfloat16>;

}  // namespace twinpipe::execute::cuda
