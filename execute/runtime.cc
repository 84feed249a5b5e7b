#include "execute/runtime.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "execute/gemm.h"
#include "execute/layers/softmax_cross_entropy.h"
#include "execute/model.h"
#include "execute/mpi.h"
#include "execute/optimizer.h"
#include "execute/sync.h"
#include "execute/tied.h"
#include "execute/transport.h"
#include "execute/walker.h"
#include "traces/schedule_trace.h"

namespace twinpipe::execute {
namespace {

using ir::Op;
using ir::OpKind;
using Clock = std::chrono::steady_clock;

// The CPU backend's table for the walker (walker.h): host tensors, OpenBLAS
// layers, messages that carry copies, and all-reduces on a host stream per
// device beside its compute.
class CpuBackend {
 public:
  using Tensor = execute::Tensor;
  using Layer = execute::Layer;
  using Saved = execute::Saved;
  using Param = execute::Param;

  CpuBackend(const cost::Config& c, const cost::Plan& plan, const ExecuteOptions& o, OptimizerKind optimizer)
      : c_(c), plan_(plan), s_(plan.schedule), o_(o), task_(c),
        optimizer_{optimizer, c.training.learning_rate, c.training.momentum} {}

  Result<void> Setup(const std::vector<Worker>& local) {
    const int D = s_.num_devices, R = std::max(1, s_.replicas);
    devs_.resize(static_cast<size_t>(D) * R);
    for (const Worker& w : local) devs_[w.id] = std::make_unique<Dev>();
    if (c_.transformer && c_.transformer->tied_embeddings) {
      tied_ = std::make_unique<TiedGradients>(s_, o_.mpi, local.front().id);
    }
    if (R > 1) {
      for (const Worker& w : local) devs_[w.id]->allreduce = std::make_unique<HostStream>();
      if (o_.mpi) {
        averagers_.push_back(std::make_unique<MpiReplicaAverager>(local.front().id, D));
      } else {
        for (int d = 0; d < D; ++d) averagers_.push_back(std::make_unique<InProcReplicaAverager>(R));
      }
    }
    return {};
  }
  Result<std::vector<std::unique_ptr<Layer>>> BuildCell(const Worker&, int stage) {
    const auto& cell = plan_.partition.cells[stage];
    return BuildLayers(c_, cell.first_layer, cell.last_layer);
  }
  int64_t ParamBytes(const Worker&, const Param& p) const {
    // The value, its fp64 gradient, optimizer state (2 for Adam) and the
    // micro-batch's fp32 gradient scratch.
    const int64_t state = optimizer_.kind == OptimizerKind::kAdam ? 2 : 1;
    return static_cast<int64_t>(p.value.size()) * (4 + 8 + 4 * state) + static_cast<int64_t>(p.scratch.size()) * 4;
  }
  MemoryAccount& Account(const Worker& w) { return devs_[w.id]->account; }

  void BeginStep(const Worker& w, int /*step*/, const SyntheticTask::Batch& batch, int64_t first_sample) {
    Dev& dev = *devs_[w.id];
    dev.batch = &batch;
    dev.first_sample = first_sample;
    dev.loss = 0;
    dev.times.assign(s_.programs[w.device].size(), {0.0, 0.0});
  }
  void StartClock(const Worker& w, Clock::time_point origin) {
    devs_[w.id]->origin = origin;
    devs_[w.id]->account.Reset(origin);
  }
  void BeginOp(const Worker& w, size_t i, const Op& op) {
    if (op.kind != OpKind::kAllReduce) devs_[w.id]->times[i].first = Since(w);
  }
  void EndOp(const Worker& w, size_t i, const Op& op) {
    if (op.kind != OpKind::kAllReduce) devs_[w.id]->times[i].second = Since(w);
  }

  Tensor Input(const Worker& w, int micro_batch) {
    Dev& dev = *devs_[w.id];
    const auto rows = static_cast<int>(c_.training.MicroBatchSize());
    const int cols = task_.input_cols();
    Tensor x(&dev.account, rows, cols);
    const size_t first = static_cast<size_t>(dev.first_sample + static_cast<int64_t>(micro_batch) * rows) * cols;
    std::copy_n(&dev.batch->inputs[first], static_cast<size_t>(rows) * cols, x.data());
    return x;
  }
  Tensor Forward(const Worker&, Layer& l, const Tensor& x, Saved& saved, Mode mode) { return l.Forward(x, saved, mode); }
  Tensor Backward(const Worker&, Layer& l, const Tensor& dy, const Saved& saved) { return l.Backward(dy, saved); }
  Tensor BackwardInput(const Worker&, Layer& l, const Tensor& dy, Saved& saved) { return l.BackwardInput(dy, saved); }
  void BackwardWeight(const Worker&, Layer& l, Saved& saved) { l.BackwardWeight(saved); }
  Tensor Loss(const Worker& w, const Tensor& y, int micro_batch) {
    Dev& dev = *devs_[w.id];
    // The loss is the mean over every label of the replica's mini-batch; the
    // all-reduce averages the replicas'.
    const int64_t per = task_.labels_per_sample(), rows = c_.training.MicroBatchSize();
    const auto first = dev.batch->labels.begin() + (dev.first_sample + micro_batch * rows) * per;
    std::vector<int> labels(first, first + rows * per);
    double loss = 0;
    Tensor grad = SoftmaxCrossEntropy(y, labels, static_cast<double>(c_.training.batch * per), loss);
    dev.loss += loss;
    return grad;
  }
  void Pack(const Worker&, const Op&, Tensor& t, Message& m) {
    m.data.assign(t.data(), t.data() + static_cast<size_t>(t.rows()) * t.cols());
  }
  Tensor Unpack(const Worker& w, const Op&, Message& m) {
    if (m.data.size() != static_cast<size_t>(m.rows) * m.cols) throw std::runtime_error("a message of the wrong size");
    Tensor t(&devs_[w.id]->account, m.rows, m.cols);
    std::copy(m.data.begin(), m.data.end(), t.data());
    return t;
  }
  // Queued on the device's all-reduce stream: compute goes on meanwhile.
  void AllReduce(const Worker& w, size_t i, const Op& op, std::vector<Param*> params) {
    Dev& dev = *devs_[w.id];
    ReplicaAverager& averager = *averagers_[o_.mpi ? 0 : w.device];
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
    dev.allreduce->Enqueue([this, w, i, op, params = std::move(params), &dev, &averager, deadline]() -> Result<void> {
      const double start = Since(w);
      size_t n = 0;
      for (const Param* p : params) n += p->grad.size();
      std::vector<double> grads;
      grads.reserve(n);
      for (const Param* p : params) grads.insert(grads.end(), p->grad.begin(), p->grad.end());
      const auto status = averager.Average(w.replica, grads, deadline);
      if (status == SyncStatus::kAborted) return FailAborted();
      if (status == SyncStatus::kTimeout) {
        return FailRuntime(fmt::format("{} timed out after {} s waiting for the other replicas", walk::Where(op, w),
                                       o_.timeout_s));
      }
      auto at = grads.begin();
      for (Param* p : params) {
        std::copy_n(at, p->grad.size(), p->grad.begin());
        at += static_cast<ptrdiff_t>(p->grad.size());
      }
      dev.times[i] = {start, Since(w)};
      return {};
    });
  }
  void Step(const Worker& w, int step, const std::vector<Param*>& params, Clock::time_point deadline) {
    WaitAllReduces(w, deadline);
    if (tied_) SumTied(w, params, deadline);
    Optimizer opt = optimizer_;
    opt.step = step + 1;
    for (Param* p : params) opt.Apply(*p);
  }
  void EndLayerStep(const Worker&, Layer& layer) { layer.EndStep(); }
  void EndStep(const Worker& w, Clock::time_point deadline) { WaitAllReduces(w, deadline); }
  void AfterStep(const Worker&, Clock::time_point) {}
  std::pair<double, double> OpTime(const Worker& w, size_t i) const { return devs_[w.id]->times[i]; }
  double StepLoss(const Worker& w) const { return devs_[w.id]->loss; }
  void AppendParams(const Worker&, const Param& p, std::vector<float>& out) const {
    out.insert(out.end(), p.value.begin(), p.value.end());
  }
  void AppendState(const Worker&, const Layer& layer, std::vector<double>& out) const { layer.AppendState(out); }
  void Abort() {
    for (auto& dev : devs_) {
      if (dev && dev->allreduce) dev->allreduce->Abort();
    }
    for (auto& a : averagers_) a->Abort();
    if (tied_) tied_->Abort();
  }

 private:
  struct Dev {
    MemoryAccount account;
    Clock::time_point origin;
    std::vector<std::pair<double, double>> times;  // by position in the program
    double loss = 0;
    const SyntheticTask::Batch* batch = nullptr;
    int64_t first_sample = 0;
    std::unique_ptr<HostStream> allreduce;  // with replicas
  };
  double Since(const Worker& w) const {
    return std::chrono::duration<double>(Clock::now() - devs_[w.id]->origin).count();
  }
  // The tied embedding's gradients, after the replicas' (tied.h).
  void SumTied(const Worker& w, const std::vector<Param*>& params, Clock::time_point deadline) {
    const auto status = tied_->Sum(w.replica, params, deadline);
    if (status == SyncStatus::kAborted) throw Aborted();
    if (status == SyncStatus::kTimeout) {
      throw OpFailure(fmt::format("device {}: STEP timed out after {} s summing the tied embedding's gradient with "
                                  "the other stage that holds it", w.id, o_.timeout_s));
    }
  }
  void WaitAllReduces(const Worker& w, Clock::time_point deadline) {
    Dev& dev = *devs_[w.id];
    if (!dev.allreduce) return;
    auto ok = dev.allreduce->Wait(deadline);
    if (!ok && ok.error().kind == ErrorKind::kAborted) throw Aborted();
    if (!ok) throw OpFailure(ok.error().message);
  }

  OneBlasThread blas_;  // first made, last gone: after every device's thread is joined
  const cost::Config& c_;
  const cost::Plan& plan_;
  const ir::Schedule& s_;
  const ExecuteOptions& o_;
  SyntheticTask task_;
  Optimizer optimizer_;
  // Declared before devs_, so destroyed after it: a device's all-reduce
  // stream may still be leaving Average after an abort until its thread is
  // joined, which destroying devs_ does.
  std::vector<std::unique_ptr<ReplicaAverager>> averagers_;  // per pipeline device (one under MPI)
  std::unique_ptr<TiedGradients> tied_;                      // tied embeddings only
  std::vector<std::unique_ptr<Dev>> devs_;  // by worker id; this process's only
};

}  // namespace

size_t MedianStep(const std::vector<double>& step_time_s) {
  std::vector<size_t> order(step_time_s.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return step_time_s[a] < step_time_s[b]; });
  return order.empty() ? 0 : order[(order.size() - 1) / 2];
}

double ExecutorOverhead(const ExecuteResult& r) {
  if (r.step_time_s.empty()) return 0;
  const double step = r.step_time_s[MedianStep(r.step_time_s)];
  std::map<std::pair<int32_t, traces::Stream>, double> busy;
  double busiest = 0;
  for (const traces::Event& e : r.trace.events) busiest = std::max(busiest, busy[{e.device, e.stream}] += e.end_s - e.start_s);
  return step > 0 ? (step - busiest) / step : 0;
}

traces::Trace MedianStepTrace(std::string source, const ir::Schedule& s, const std::vector<double>& step_time_s,
                              std::vector<std::vector<traces::Event>>& step_events,
                              std::vector<std::vector<std::vector<traces::MemorySample>>>& step_memory) {
  traces::Trace t = traces::TraceFor(s, std::move(source));
  const size_t median = MedianStep(step_time_s);
  t.events = std::move(step_events[median]);
  t.memory = std::move(step_memory[median]);
  return t;
}

void GatherStepAcrossRanks(const ir::Schedule& s, int rank, std::vector<double>& loss_sum, double& step_time_s,
                           std::vector<double>& peaks, std::vector<traces::Event>& events) {
  SumAcrossRanks(loss_sum);
  SumAcrossRanks(peaks);  // each rank's own entry, zeros elsewhere
  std::vector<double> slowest{step_time_s};
  MaxAcrossRanks(slowest);
  step_time_s = slowest[0];
  // The trace is replica 0's: ranks 0..D-1.
  std::vector<double> times(2 * static_cast<size_t>(s.NumOps()), 0.0);
  if (rank < s.num_devices) {
    for (const Op& op : s.programs[rank]) {
      times[2 * static_cast<size_t>(op.id)] = events[op.id].start_s;
      times[2 * static_cast<size_t>(op.id) + 1] = events[op.id].end_s;
    }
  }
  SumAcrossRanks(times);
  for (int d = 0; d < s.num_devices; ++d) {
    for (const Op& op : s.programs[d]) {
      events[op.id].start_s = times[2 * static_cast<size_t>(op.id)];
      events[op.id].end_s = times[2 * static_cast<size_t>(op.id) + 1];
    }
  }
}

Result<ExecuteResult> ExecuteCpu(const cost::Config& config, const cost::Plan& plan, const ExecuteOptions& options) {
  if (auto ok = CheckExecutable(config); !ok) return tl::unexpected(ok.error());
  const Result<OptimizerKind> optimizer = OptimizerOf(config);
  if (!optimizer) return tl::unexpected(optimizer.error());
  CpuBackend backend(config, plan, options, *optimizer);
  Walker<CpuBackend> walker(backend, config, plan, options, "execute:cpu");
  return walker.Run();
}

}  // namespace twinpipe::execute
