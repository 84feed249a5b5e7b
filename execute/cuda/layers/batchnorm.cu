#include "execute/cuda/layers/batchnorm.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

// A thread per column, rows in order. running: mean[C], var[C];
// sums: sum[C], sum_sq[C] (doubles).
__global__ void BatchNormForward(const float* x, int rows, int cols, const float* gamma, const float* beta, float eps,
                                 int mode, const double* running, double* sums, float* y, float* xhat, float* rstd) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double mean, var;
  if (mode == 2) {  // eval
    mean = running[c];
    var = running[cols + c];
  } else {
    double s = 0, sq = 0;
    for (int r = 0; r < rows; ++r) {
      const double v = x[static_cast<long long>(r) * cols + c];
      s += v;
      sq += v * v;
    }
    if (mode == 0) {  // train: count the rows towards the running statistics
      sums[c] += s;
      sums[cols + c] += sq;
    }
    mean = s / rows;
    var = fmax(0.0, sq / rows - mean * mean);
  }
  const float rs = static_cast<float>(1.0 / sqrt(var + eps));
  if (rstd) rstd[c] = rs;
  for (int r = 0; r < rows; ++r) {
    const long long i = static_cast<long long>(r) * cols + c;
    const float h = static_cast<float>((x[i] - mean) * rs);
    if (xhat) xhat[i] = h;
    y[i] = h * gamma[c] + beta[c];
  }
}

__global__ void BatchNormBackward(const float* dy, const float* xhat, const float* rstd, const float* gamma, int rows,
                                  int cols, float* dx, float* dgamma, float* dbeta) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double sg = 0, sgx = 0, dg = 0, db = 0;
  for (int r = 0; r < rows; ++r) {
    const long long i = static_cast<long long>(r) * cols + c;
    const double g = static_cast<double>(dy[i]) * gamma[c];
    sg += g;
    sgx += g * xhat[i];
    dg += static_cast<double>(dy[i]) * xhat[i];
    db += dy[i];
  }
  dgamma[c] += static_cast<float>(dg);
  dbeta[c] += static_cast<float>(db);
  for (int r = 0; r < rows; ++r) {
    const long long i = static_cast<long long>(r) * cols + c;
    const double g = static_cast<double>(dy[i]) * gamma[c];
    dx[i] = static_cast<float>(rstd[c] * (g - sg / rows - xhat[i] * sgx / rows));
  }
}

__global__ void FoldRunning(int cols, double n, float momentum, double* running, double* sums) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const double mean = sums[c] / n;
  const double var = fmax(0.0, sums[cols + c] / n - mean * mean);
  const double unbiased = n > 1 ? var * n / (n - 1) : var;
  running[c] = (1 - momentum) * running[c] + momentum * mean;
  running[cols + c] = (1 - momentum) * running[cols + c] + momentum * unbiased;
  sums[c] = sums[cols + c] = 0;
}

__global__ void InitRunning(int cols, double* running) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  running[c] = 0;
  running[cols + c] = 1;
}

double* Doubles(const DeviceBuffer& b) { return reinterpret_cast<double*>(b.get()); }

}  // namespace

BatchNorm::BatchNorm(int features, float momentum, float eps, const std::vector<Param*>& init)
    : c_(features), momentum_(momentum), eps_(eps), gamma_(Upload(*init.at(0))), beta_(Upload(*init.at(1))),
      running_(4 * static_cast<int64_t>(features)), step_sums_(4 * static_cast<int64_t>(features)) {
  InitRunning<<<Blocks(c_), kThreads>>>(c_, Doubles(running_));
  Launched("batchnorm running statistics");
}

DeviceTensor BatchNorm::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  DeviceTensor y = ctx.Alloc(B, c_);
  DeviceTensor xhat, rstd;
  if (mode != Mode::kEval) {
    xhat = ctx.Alloc(B, c_);
    rstd = ctx.Alloc(1, c_);
  }
  const int m = mode == Mode::kTrain ? 0 : mode == Mode::kRecompute ? 1 : 2;
  BatchNormForward<<<Blocks(c_), kThreads, 0, ctx.stream>>>(x.data(), B, c_, gamma_.value.get(), beta_.value.get(),
                                                            eps_, m, Doubles(running_), Doubles(step_sums_), y.data(),
                                                            xhat.empty() ? nullptr : xhat.data(),
                                                            rstd.empty() ? nullptr : rstd.data());
  Launched("batchnorm forward");
  if (mode == Mode::kTrain) step_rows_ += B;
  if (mode != Mode::kEval) saved.t = {xhat, rstd};
  return y;
}

DeviceTensor BatchNorm::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  const int B = dy.rows();
  DeviceTensor dx = ctx.Alloc(B, c_);
  BatchNormBackward<<<Blocks(c_), kThreads, 0, ctx.stream>>>(dy.data(), saved.t.at(0).data(), saved.t.at(1).data(),
                                                             gamma_.value.get(), B, c_, dx.data(), gamma_.grad.get(),
                                                             beta_.grad.get());
  Launched("batchnorm backward");
  return dx;
}

void BatchNorm::AppendState(const Context& ctx, std::vector<double>& out) const {
  const size_t at = out.size();
  out.resize(at + 2 * static_cast<size_t>(c_));  // mean[C], var[C], as running_ holds them
  TP_CUDA(cudaStreamSynchronize(ctx.stream));
  TP_CUDA(cudaMemcpy(out.data() + at, Doubles(running_), 2 * static_cast<size_t>(c_) * sizeof(double),
                     cudaMemcpyDeviceToHost));
}

void BatchNorm::EndStep(const Context& ctx) {
  if (step_rows_ == 0) return;
  FoldRunning<<<Blocks(c_), kThreads, 0, ctx.stream>>>(c_, static_cast<double>(step_rows_), momentum_,
                                                       Doubles(running_), Doubles(step_sums_));
  Launched("batchnorm running statistics");
  step_rows_ = 0;
}

}  // namespace twinpipe::execute::cuda
