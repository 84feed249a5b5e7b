// A 2-D fp32 tensor (rows x cols, row-major) whose bytes are counted in a
// device's MemoryAccount for as long as it lives.
//
//   Tensor x(&account, /*rows=*/8, /*cols=*/64);   // (B, C), zeroed
//   x.at(0, 3) = 1.f;
#pragma once

#include <cstdint>
#include <vector>

#include "execute/memory_account.h"

namespace twinpipe::execute {

class Tensor {
 public:
  Tensor() = default;
  Tensor(MemoryAccount* account, int rows, int cols) : account_(account), rows_(rows), cols_(cols) {
    data_.assign(static_cast<size_t>(rows) * cols, 0.f);
    if (account_) account_->Add(bytes());
  }
  Tensor(const Tensor& other) : Tensor(other.account_, other.rows_, other.cols_) { data_ = other.data_; }
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

  MemoryAccount* account_ = nullptr;
  int rows_ = 0, cols_ = 0;
  std::vector<float> data_;
};

}  // namespace twinpipe::execute
