// A 2-D fp32 tensor (rows x cols, row-major) whose bytes are counted in a
// device's MemoryAccount for as long as it lives.
//
//   Tensor x(&account, /*rows=*/8, /*cols=*/64);   // (B, C), zeroed
//   x.at(0, 3) = 1.f;
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "execute/memory_account.h"

namespace twinpipe::execute {

class Tensor {
 public:
  Tensor() = default;
  Tensor(MemoryAccount* account, int rows, int cols) : Tensor(account, rows, cols, 0) {
    std::fill(data_.begin(), data_.end(), 0.f);
  }
  // Not zeroed: for an output whose every element the caller writes (a
  // GEMM with beta 0, an elementwise result); no time spent clearing it.
  static Tensor Uninitialized(MemoryAccount* account, int rows, int cols) { return Tensor(account, rows, cols, 0); }
  Tensor(const Tensor& other) : Tensor(other.account_, other.rows_, other.cols_, 0) {
    std::copy(other.data_.begin(), other.data_.end(), data_.begin());
  }
  Tensor& operator=(const Tensor& other) {
    if (this != &other) *this = Tensor(other);
    return *this;
  }
  Tensor(Tensor&& other) noexcept { Swap(other); }
  Tensor& operator=(Tensor&& other) noexcept {
    Release();
    Swap(other);
    return *this;
  }
  ~Tensor() { Release(); }

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  bool empty() const { return data_.empty(); }
  int64_t bytes() const { return static_cast<int64_t>(data_.size() * sizeof(float)); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& at(int r, int c) { return data_[static_cast<size_t>(r) * cols_ + c]; }
  float at(int r, int c) const { return data_[static_cast<size_t>(r) * cols_ + c]; }
  // Where element (r, c) lives: sub-matrices for strided GEMMs.
  float* ptr(int r, int c) { return data_.data() + static_cast<size_t>(r) * cols_ + c; }
  const float* ptr(int r, int c) const { return data_.data() + static_cast<size_t>(r) * cols_ + c; }
  MemoryAccount* account() const { return account_; }

  // Frees the storage now (and its accounting).
  void Release() {
    if (account_ && !data_.empty()) account_->Sub(bytes());
    data_.clear();
    data_.shrink_to_fit();
    rows_ = cols_ = 0;
  }

 private:
  void Swap(Tensor& o) noexcept {
    std::swap(account_, o.account_);
    std::swap(rows_, o.rows_);
    std::swap(cols_, o.cols_);
    data_.swap(o.data_);
  }

  // Allocates without initialising the elements.
  Tensor(MemoryAccount* account, int rows, int cols, int) : account_(account), rows_(rows), cols_(cols) {
    data_.resize(static_cast<size_t>(rows) * cols);
    if (account_) account_->Add(bytes());
  }

  // Makes resize() leave floats uninitialised (a vector's value-initialises).
  template <typename T>
  struct DefaultInit : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = DefaultInit<U>;
    };
    DefaultInit() = default;
    template <typename U>
    DefaultInit(const DefaultInit<U>&) noexcept {}
    template <typename U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  };

  MemoryAccount* account_ = nullptr;
  int rows_ = 0, cols_ = 0;
  std::vector<float, DefaultInit<float>> data_;
};

}  // namespace twinpipe::execute
