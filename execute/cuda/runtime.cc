// The CUDA backend: the walker's table (execute/walker.h) on CUDA streams,
// events, the stream-ordered allocator, transports and NCCL; the walk itself
// is the CPU backend's.
//
// Transfers: a header (kind, stage, micro-batch, shape) goes over the host
// transport (threads, or MPI between processes) and the payload by link:
//   local        same GPU: a device-to-device copy on the receiver's stream
//   p2p          cudaMemcpyPeerAsync on the receiver's stream; the sender's
//                buffer is lent until the copy is done, then freed on the
//                sender's send stream
//   host-staged  D2H into pinned host memory on the sender's send stream,
//                H2D on the receiver's recv stream (PCIe without P2P)
//   nccl         ncclSend / ncclRecv on a two-rank communicator per ordered
//                device pair, in the schedule's per-peer order
// Data-parallel replicas average their gradients with ncclAllReduce (ncclAvg)
// on a communicator per pipeline device joining its replicas.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "execute/cuda/check.h"
#include "execute/cuda/comm_registry.h"
#include "execute/cuda/from_cpu.h"
#include "execute/cuda/layers/softmax_cross_entropy.h"
#include "execute/cuda/optimizer.h"
#include "execute/model.h"
#include "execute/mpi.h"
#include "execute/optimizer.h"
#include "execute/runtime.h"
#include "execute/tied.h"
#include "execute/transport.h"
#include "execute/walker.h"

namespace twinpipe::execute {
namespace cuda {
namespace {

using ir::Op;
using ir::OpKind;
using Clock = std::chrono::steady_clock;

enum class Link { kLocal, kP2p, kHostStaged, kNccl };

const char* LinkName(Link l) {
  switch (l) {
    case Link::kLocal: return "local";
    case Link::kP2p: return "p2p";
    case Link::kHostStaged: return "host-staged";
    case Link::kNccl: return "nccl";
  }
  return "?";
}

// What a message hands over between the threads of one process.
struct Handoff {
  DeviceTensor tensor;          // local, p2p: the sender's buffer, lent until copied
  const float* host = nullptr;  // host-staged: the pinned copy
  cudaEvent_t ready = nullptr;  // the payload is complete once this has fired
  int gpu = 0;
};

// A lent buffer coming back to its sender once the receiver's copy is queued.
struct Returned {
  DeviceTensor tensor;
  cudaEvent_t copied = nullptr;
};

// Events of one device, reused step after step.
class EventPool {
 public:
  ~EventPool() {
    for (cudaEvent_t e : events_) static_cast<void>(cudaEventDestroy(e));
  }
  cudaEvent_t Get() {
    if (next_ == events_.size()) {
      cudaEvent_t e;
      TP_CUDA(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return events_[next_++];
  }
  void Reset() { next_ = 0; }

 private:
  std::vector<cudaEvent_t> events_;
  size_t next_ = 0;
};

// Pinned host memory for host-staged sends, reused step after step.
class PinnedArena {
 public:
  ~PinnedArena() {
    for (auto& [p, n] : chunks_) static_cast<void>(cudaFreeHost(p));
  }
  float* Take(int64_t bytes) {
    bytes = (bytes + 255) / 256 * 256;
    while (chunk_ < chunks_.size() && used_ + bytes > chunks_[chunk_].second) {
      ++chunk_;
      used_ = 0;
    }
    if (chunk_ == chunks_.size()) {
      void* p = nullptr;
      const int64_t n = std::max<int64_t>(bytes, int64_t{64} << 20);
      TP_CUDA(cudaHostAlloc(&p, static_cast<size_t>(n), cudaHostAllocPortable));
      chunks_.emplace_back(p, n);
      used_ = 0;
    }
    auto* out = reinterpret_cast<float*>(static_cast<char*>(chunks_[chunk_].first) + used_);
    used_ += bytes;
    return out;
  }
  void Reset() { chunk_ = 0, used_ = 0; }

 private:
  std::vector<std::pair<void*, int64_t>> chunks_;
  size_t chunk_ = 0;
  int64_t used_ = 0;
};

void AbortComm(ncclComm_t comm) { static_cast<void>(ncclCommAbort(comm)); }
void DestroyComm(ncclComm_t comm) { static_cast<void>(ncclCommDestroy(comm)); }

// One cluster device: its GPU, streams, memory and what its ops leave.
struct Device {
  int gpu = 0;
  cudaStream_t compute = nullptr, send = nullptr, recv = nullptr, allreduce = nullptr;
  std::unique_ptr<Blas> blas;
  MemoryAccount account;
  Context ctx;
  EventPool events;
  PinnedArena pinned;
  cudaEvent_t origin = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> op_events;  // by position in the program
  std::vector<std::pair<double, double>> times;                // the same, read after the step
  std::vector<cudaEvent_t> arrived;  // [(stage * M + micro-batch) * 2 + backward]: set by a RECV, awaited by its consumer
  // By peer (pipeline device), and this device's replicas' with R > 1; any
  // thread may abort them (comm_registry.h), only this destructor destroys.
  CommRegistry<ncclComm_t> comms{AbortComm, DestroyComm};
  std::mutex returned_mu;
  std::vector<Returned> returned;
  DeviceTensor batch;             // stage 0: this replica's inputs of the step (not counted)
  int* labels = nullptr;          // last stage: this replica's labels
  double* loss = nullptr;         // last stage: the step's summed loss
  double loss_host = 0;
  int64_t pool_peak = 0;
  int64_t used = 0;  // cudaMemGetInfo's total - free, at the end of the step

  ~Device() {
    static_cast<void>(cudaSetDevice(gpu));
    // Tensors first: they are freed on the streams below.
    returned.clear();
    batch.Release();
    static_cast<void>(cudaDeviceSynchronize());
    if (labels) static_cast<void>(cudaFree(labels));
    if (loss) static_cast<void>(cudaFree(loss));
    comms.Destroy();  // those not aborted
    blas.reset();
    for (cudaStream_t s : {compute, send, recv, allreduce}) {
      if (s) static_cast<void>(cudaStreamDestroy(s));
    }
  }
};

// The CUDA backend's table for the walker (walker.h). Cluster device w runs
// on GPU w mod the GPUs there are (under MPI, the rank's local GPU) with
// four streams: compute, send, recv and all-reduce. The walker's thread only
// queues work; streams are ordered by events, so transfers and all-reduces
// overlap compute as the simulator assumes, and every op is timed by a pair
// of CUDA events on its stream, read after the step.
class CudaBackend {
 public:
  using Tensor = DeviceTensor;
  using Layer = cuda::Layer;
  using Saved = cuda::Saved;
  using Param = DeviceParam;
  using Clock = std::chrono::steady_clock;

  CudaBackend(const cost::Config& c, const cost::Plan& plan, const ExecuteOptions& o, OptimizerKind optimizer)
      : c_(c), plan_(plan), s_(plan.schedule), o_(o), task_(c), optimizer_(optimizer), D_(s_.num_devices),
        R_(std::max(1, s_.replicas)) {}

  Result<void> Setup(const std::vector<Worker>& local);
  Result<std::vector<std::unique_ptr<Layer>>> BuildCell(const Worker& w, int stage) {
    Device& dev = *devices_[w.id];
    TP_CUDA(cudaSetDevice(dev.gpu));
    const auto& cell = plan_.partition.cells[stage];
    std::vector<std::unique_ptr<Layer>> layers;
    for (auto& layer : BuildLayers(c_, cell.first_layer, cell.last_layer)) {
      auto gpu = FromCpu(*layer);
      if (!gpu) return tl::unexpected(gpu.error());
      layers.push_back(std::move(*gpu));
    }
    TP_CUDA(cudaDeviceSynchronize());
    return layers;
  }
  // The value, its gradient and the optimizer's two moments, in fp32, and in
  // BF16 a GEMM weight's bf16 copy of the value (bf16.h).
  int64_t ParamBytes(const Worker&, const Param& p) const {
    const bool copy = precision_ == Precision::kBf16 && p.keeps_bf16;
    return p.value.size() * (16 + (copy ? 2 : 0));
  }
  MemoryAccount& Account(const Worker& w) { return devices_[w.id]->account; }

  void BeginStep(const Worker& w, int step, const SyntheticTask::Batch& batch, int64_t first_sample);
  void StartClock(const Worker& w, Clock::time_point origin);
  void BeginOp(const Worker& w, size_t i, const Op& op);
  void EndOp(const Worker& w, size_t i, const Op& op) {
    Device& dev = *devices_[w.id];
    TP_CUDA(cudaEventRecord(dev.op_events[i].second, StreamOf(dev, op.kind)));
  }

  Tensor Input(const Worker& w, int micro_batch) {
    Device& dev = *devices_[w.id];
    const auto mb = static_cast<int>(c_.training.MicroBatchSize());
    DeviceTensor x = dev.ctx.Alloc(mb, task_.input_cols());
    TP_CUDA(cudaMemcpyAsync(x.data(), dev.batch.Rows(micro_batch * mb, mb).data(), static_cast<size_t>(x.bytes()),
                            cudaMemcpyDeviceToDevice, dev.compute));
    return x;
  }
  Tensor Forward(const Worker& w, Layer& l, const Tensor& x, Saved& saved, Mode mode) {
    return l.Forward(devices_[w.id]->ctx, x, saved, mode);
  }
  Tensor Backward(const Worker& w, Layer& l, const Tensor& dy, const Saved& saved) {
    return l.Backward(devices_[w.id]->ctx, dy, saved);
  }
  Tensor BackwardInput(const Worker& w, Layer& l, const Tensor& dy, Saved& saved) {
    return l.BackwardInput(devices_[w.id]->ctx, dy, saved);
  }
  void BackwardWeight(const Worker& w, Layer& l, Saved& saved) { l.BackwardWeight(devices_[w.id]->ctx, saved); }
  Tensor Loss(const Worker& w, const Tensor& y, int micro_batch) {
    Device& dev = *devices_[w.id];
    const int64_t per = task_.labels_per_sample(), mb = c_.training.MicroBatchSize();
    return SoftmaxCrossEntropy(dev.ctx, y, dev.labels + micro_batch * mb * per,
                               static_cast<double>(c_.training.batch * per), dev.loss);
  }
  void Pack(const Worker& w, const Op& op, Tensor& t, Message& m);
  Tensor Unpack(const Worker& w, const Op& op, Message& m);
  void AllReduce(const Worker& w, size_t i, const Op& op, const std::vector<Param*>& params);
  void Step(const Worker& w, int step, const std::vector<Param*>& params, Clock::time_point deadline) {
    const Context& ctx = devices_[w.id]->ctx;
    if (tied_) SumTied(w, params, deadline);
    for (DeviceParam* p : params) {
      Apply(ctx, optimizer_, c_.training.learning_rate, c_.training.momentum, step + 1, *p);
    }
  }
  void EndLayerStep(const Worker& w, Layer& layer) { layer.EndStep(devices_[w.id]->ctx); }
  void EndStep(const Worker& w, Clock::time_point deadline) { WaitIdle(*devices_[w.id], deadline); }
  void AfterStep(const Worker& w, Clock::time_point deadline);
  std::pair<double, double> OpTime(const Worker& w, size_t i) const { return devices_[w.id]->times[i]; }
  double StepLoss(const Worker& w) const { return devices_[w.id]->loss_host; }
  void AppendState(const Worker& w, const Layer& layer, std::vector<double>& out) const {
    TP_CUDA(cudaSetDevice(devices_[w.id]->gpu));
    layer.AppendState(devices_[w.id]->ctx, out);
  }
  void AppendParams(const Worker& w, const Param& p, std::vector<float>& out) const {
    TP_CUDA(cudaSetDevice(devices_[w.id]->gpu));
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(p.value.size()));
    TP_CUDA(cudaMemcpy(out.data() + at, p.value.get(), static_cast<size_t>(p.value.size()) * 4, cudaMemcpyDeviceToHost));
  }
  void Abort();
  // The GPU's own figures and the links, after the last step.
  void Finish(ExecuteResult& result);

 private:
  Result<void> SetupComms(const std::vector<Worker>& local, const std::function<int(int)>& gpu_of);
  static cudaStream_t StreamOf(const Device& dev, OpKind kind) {
    return ir::IsSend(kind) ? dev.send : ir::IsRecv(kind) ? dev.recv : kind == OpKind::kAllReduce ? dev.allreduce
                                                                                                   : dev.compute;
  }
  cudaEvent_t& Arrival(Device& dev, const Op& op, bool backward) const {
    return dev.arrived[(static_cast<size_t>(op.stage) * s_.num_micro_batches + op.micro_batch) * 2 + backward];
  }
  void DrainReturned(Device& dev);
  void WaitIdle(Device& dev, Clock::time_point deadline);
  void SumTied(const Worker& w, const std::vector<Param*>& params, Clock::time_point deadline);
  Link LinkOf(int src, int dst) const { return links_.at({src, dst}); }

  const cost::Config& c_;
  const cost::Plan& plan_;
  const ir::Schedule& s_;
  const ExecuteOptions& o_;
  SyntheticTask task_;
  OptimizerKind optimizer_;
  int D_, R_;
  Precision precision_ = Precision::kFp32;
  int gpus_ = 0;
  std::vector<std::unique_ptr<Device>> devices_;  // by cluster device; this process's only
  std::map<std::pair<int, int>, Link> links_;     // every (src, dst) pipeline device pair that sends
  std::unique_ptr<TiedGradients> tied_;           // tied embeddings only
  std::atomic<bool> failed_{false};
};

Result<void> CudaBackend::Setup(const std::vector<Worker>& local) {
  // First: under MPI every rank makes the tied pair's communicator.
  if (c_.transformer && c_.transformer->tied_embeddings) {
    tied_ = std::make_unique<TiedGradients>(s_, o_.mpi, local.front().id);
  }
  precision_ = o_.precision;
  const cudaError_t count = cudaGetDeviceCount(&gpus_);
  if (count != cudaSuccess || gpus_ == 0) {
    return FailRuntime(fmt::format("no CUDA device: cudaGetDeviceCount says {} ({}); run with --backend cpu",
                                   count == cudaSuccess ? "0 devices" : cudaGetErrorName(count),
                                   count == cudaSuccess ? "none found" : cudaGetErrorString(count)));
  }
  // The config's GPUs, where it names fewer than the machine has: the
  // simulator shares each between the same devices.
  if (c_.cluster.gpus > 0) gpus_ = std::min(gpus_, c_.cluster.gpus);
  const int local_rank = o_.local_rank;
  // The GPU of cluster device `id` (under MPI, known for this rank's only).
  auto gpu_of = [&](int id) { return o_.mpi ? (id == local.front().id ? local_rank % gpus_ : -1) : id % gpus_; };

  // Links: every ordered pair of pipeline devices a SEND joins (replica 0's
  // GPUs decide; the replicas are placed alike).
  const TransportKind want = o_.transport;
  for (const auto& p : s_.programs) {
    for (const Op& op : p) {
      if (!ir::IsSend(op.kind) || links_.count({op.device, op.peer})) continue;
      Link link;
      const int gs = gpu_of(op.device), gd = gpu_of(op.peer);
      const bool same = !o_.mpi && gs == gd;
      if (want == TransportKind::kAuto) {
        if (o_.mpi) {
          link = Link::kNccl;
        } else if (same) {
          link = Link::kLocal;
        } else {
          int can = 0;
          TP_CUDA(cudaDeviceCanAccessPeer(&can, gs, gd));
          link = can ? Link::kP2p : Link::kHostStaged;
        }
      } else if (want == TransportKind::kLocal) {
        if (!same) {
          return Fail(fmt::format("--transport local: devices {} and {} are on different GPUs ({} GPUs{}); local "
                                  "joins stages on one GPU", op.device, op.peer, gpus_, o_.mpi ? ", one per rank" : ""));
        }
        link = Link::kLocal;
      } else if (want == TransportKind::kP2p || want == TransportKind::kHostStaged) {
        if (o_.mpi) {
          return Fail(fmt::format("--transport {}: joins devices of one process; between MPI ranks use nccl",
                                  TransportName(want)));
        }
        link = want == TransportKind::kP2p ? Link::kP2p : Link::kHostStaged;
      } else {  // nccl
        if (same) {
          return Fail(fmt::format("--transport nccl: devices {} and {} share GPU {}, and NCCL joins ranks on "
                                  "different GPUs (use local, or more GPUs)", op.device, op.peer, gs));
        }
        link = Link::kNccl;
      }
      links_[{op.device, op.peer}] = link;
    }
  }
  // NCCL averages the replicas' gradients, and joins ranks on distinct GPUs.
  if (R_ > 1 && !o_.mpi) {
    for (int d = 0; d < D_; ++d) {
      for (int r = 1; r < R_; ++r) {
        for (int q = 0; q < r; ++q) {
          if (gpu_of(r * D_ + d) == gpu_of(q * D_ + d)) {
            return Fail(fmt::format("{} replicas x {} devices on {} GPUs: replicas {} and {} of device {} share GPU {}, "
                                    "and NCCL's all-reduce needs a GPU per replica", R_, D_, gpus_, q, r, d,
                                    gpu_of(r * D_ + d)));
          }
        }
      }
    }
  }

  devices_.resize(static_cast<size_t>(D_) * R_);
  for (const Worker& w : local) {
    auto dev = std::make_unique<Device>();
    dev->gpu = gpu_of(w.id);
    TP_CUDA(cudaSetDevice(dev->gpu));
    // Keep freed blocks in the pool rather than returning them each sync.
    cudaMemPool_t pool;
    TP_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev->gpu));
    uint64_t keep = UINT64_MAX;
    TP_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    for (cudaStream_t* st : {&dev->compute, &dev->send, &dev->recv, &dev->allreduce}) {
      TP_CUDA(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    }
    dev->blas = std::make_unique<Blas>();
    TP_CUDA(cudaMalloc(&dev->loss, sizeof(double)));
    dev->ctx = Context{dev->compute, dev->blas.get(), &dev->account, precision_};
    dev->arrived.assign(static_cast<size_t>(s_.num_stages) * s_.num_micro_batches * 2, nullptr);
    devices_[w.id] = std::move(dev);
  }
  // Peer access for p2p links (already enabled is fine), in every replica.
  for (const Worker& w : local) {
    for (const auto& [pair, link] : links_) {
      if (link != Link::kP2p || pair.second != w.device) continue;
      const int gd = devices_[w.id]->gpu, gs = gpu_of(w.replica * D_ + pair.first);
      int can = 0;
      TP_CUDA(cudaDeviceCanAccessPeer(&can, gd, gs));
      if (gd != gs && can) {
        TP_CUDA(cudaSetDevice(gd));
        const cudaError_t e = cudaDeviceEnablePeerAccess(gs, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          static_cast<void>(cudaGetLastError());
        } else {
          TP_CUDA(e);
        }
      }
    }
  }
  return SetupComms(local, gpu_of);
}

// A two-rank communicator per ordered pair with an NCCL link, in every
// replica (the sender is rank 0, the receiver rank 1, each side driving it
// from one stream), and with replicas one communicator per pipeline device
// joining its replicas.
Result<void> CudaBackend::SetupComms(const std::vector<Worker>& local, const std::function<int(int)>& gpu_of) {
  std::vector<std::pair<int, int>> pairs;  // cluster devices
  for (int r = 0; r < R_; ++r) {
    for (const auto& [pair, link] : links_) {
      if (link == Link::kNccl) pairs.emplace_back(r * D_ + pair.first, r * D_ + pair.second);
    }
  }
  if (pairs.empty() && R_ == 1) return {};
  if (!o_.mpi) {
    for (const auto& [src, dst] : pairs) {
      ncclComm_t comms[2];
      const int gpus[2] = {devices_[src]->gpu, devices_[dst]->gpu};
      TP_CUDA(ncclCommInitAll(comms, 2, gpus));
      devices_[src]->comms.Add(CommRole::kSend, dst % D_, comms[0]);
      devices_[dst]->comms.Add(CommRole::kRecv, src % D_, comms[1]);
    }
    if (R_ > 1) {
      for (int d = 0; d < D_; ++d) {
        std::vector<ncclComm_t> comms(R_);
        std::vector<int> gpus(R_);
        for (int r = 0; r < R_; ++r) gpus[r] = gpu_of(r * D_ + d);
        TP_CUDA(ncclCommInitAll(comms.data(), R_, gpus.data()));
        for (int r = 0; r < R_; ++r) devices_[r * D_ + d]->comms.Add(CommRole::kReplica, 0, comms[r]);
      }
    }
    return {};
  }
  // Under MPI: one world communicator from rank 0's id, split per pair and
  // per replica group. Every rank takes part in every split.
  const int rank = local.front().id;
  ncclUniqueId id;
  if (rank == 0) TP_CUDA(ncclGetUniqueId(&id));
  BroadcastBytes(&id, sizeof(id), 0);
  TP_CUDA(cudaSetDevice(devices_[rank]->gpu));
  ncclComm_t world;
  TP_CUDA(ncclCommInitRank(&world, D_ * R_, id, rank));
  for (const auto& [src, dst] : pairs) {  // the same order on every rank
    const bool in = rank == src || rank == dst;
    ncclComm_t comm = nullptr;
    TP_CUDA(ncclCommSplit(world, in ? 0 : NCCL_SPLIT_NOCOLOR, rank == src ? 0 : 1, &comm, nullptr));
    if (rank == src) devices_[src]->comms.Add(CommRole::kSend, dst % D_, comm);
    if (rank == dst) devices_[dst]->comms.Add(CommRole::kRecv, src % D_, comm);
  }
  if (R_ > 1) {
    ncclComm_t replicas = nullptr;
    TP_CUDA(ncclCommSplit(world, rank % D_, rank / D_, &replicas, nullptr));
    devices_[rank]->comms.Add(CommRole::kReplica, 0, replicas);
  }
  TP_CUDA(ncclCommDestroy(world));
  return {};
}

// From the thread that failed first, while the other workers run. NCCL
// kernels waiting for a peer that will never come would hold the streams
// forever: abort the communicators, each device's as soon as its worker is
// not inside an NCCL call on them (comm_registry.h); the worker's next call
// is refused, and the device's destructor destroys nothing aborted.
void CudaBackend::Abort() {
  failed_ = true;
  for (auto& dev : devices_) {
    if (dev) dev->comms.Abort();
  }
  if (tied_) tied_->Abort();
}

// The tied embedding's gradients (execute/tied.h), after the replicas'
// all-reduces (STEP's compute stream waits for them). On one device:
// original += copy (one rounding of the exact sum), then copy = original,
// on the compute stream. On two: through the host, where the pair sums in
// double; rounded to fp32 that is the same sum.
void CudaBackend::SumTied(const Worker& w, const std::vector<Param*>& params, Clock::time_point deadline) {
  DeviceParam* original = nullptr;
  DeviceParam* copy = nullptr;
  for (DeviceParam* p : params) {
    if (p->tie == Tie::kOriginal) original = p;
    if (p->tie == Tie::kCopy) copy = p;
  }
  if (!original && !copy) return;
  Device& dev = *devices_[w.id];
  TP_CUDA(cudaSetDevice(dev.gpu));
  if (original && copy) {
    const float one = 1.f;
    const auto n = static_cast<int>(original->grad.size());
    TP_CUDA(cublasSaxpy(dev.blas->Bind(dev.compute), n, &one, copy->grad.get(), 1, original->grad.get(), 1));
    TP_CUDA(cudaMemcpyAsync(copy->grad.get(), original->grad.get(), static_cast<size_t>(n) * sizeof(float),
                            cudaMemcpyDeviceToDevice, dev.compute));
    return;
  }
  DeviceParam& mine = original ? *original : *copy;
  const auto n = static_cast<size_t>(mine.grad.size());
  std::vector<float> host(n);
  TP_CUDA(cudaMemcpyAsync(host.data(), mine.grad.get(), n * sizeof(float), cudaMemcpyDeviceToHost, dev.compute));
  TP_CUDA(cudaStreamSynchronize(dev.compute));
  std::vector<double> grad(host.begin(), host.end());
  const auto status = tied_->Exchange(w.replica, mine.tie, grad, deadline);
  if (status == SyncStatus::kAborted) throw Aborted();
  if (status == SyncStatus::kTimeout) {
    throw OpFailure(fmt::format("device {}: STEP timed out after {} s summing the tied embedding's gradient with the "
                                "other stage that holds it", w.id, o_.timeout_s));
  }
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(grad[i]);
  TP_CUDA(cudaMemcpyAsync(mine.grad.get(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice, dev.compute));
  TP_CUDA(cudaStreamSynchronize(dev.compute));  // before `host` goes
}

void CudaBackend::DrainReturned(Device& dev) {
  std::vector<Returned> back;
  {
    std::lock_guard lock(dev.returned_mu);
    back.swap(dev.returned);
  }
  for (Returned& r : back) {
    // Freed on the send stream once the receiver's copy is done: compute
    // does not wait for it.
    TP_CUDA(cudaStreamWaitEvent(dev.send, r.copied));
    r.tensor.FreeOn(dev.send);
  }
}

// Waits for the device's streams, polling so that a stuck stream ends in a
// timeout rather than a hang.
void CudaBackend::WaitIdle(Device& dev, Clock::time_point deadline) {
  for (cudaStream_t st : {dev.compute, dev.send, dev.recv, dev.allreduce}) {
    for (;;) {
      const cudaError_t e = cudaStreamQuery(st);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) TP_CUDA(e);
      if (failed_) throw Aborted();
      if (Clock::now() > deadline) {
        throw CudaError(fmt::format("timed out after {} s waiting for the GPU work of its step", o_.timeout_s));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void CudaBackend::BeginStep(const Worker& w, int /*step*/, const SyntheticTask::Batch& batch, int64_t first_sample) {
  Device& dev = *devices_[w.id];
  TP_CUDA(cudaSetDevice(dev.gpu));
  // Before the clock starts: this replica's rows of the step's data on the
  // devices that use them.
  const int64_t rows = c_.training.batch;
  if (s_.placement[0] == w.device) {
    const int cols = task_.input_cols();
    dev.batch = DeviceTensor(nullptr, dev.compute, static_cast<int>(rows), cols);
    TP_CUDA(cudaMemcpyAsync(dev.batch.data(), batch.inputs.data() + first_sample * cols,
                            static_cast<size_t>(dev.batch.bytes()), cudaMemcpyHostToDevice, dev.compute));
  }
  if (s_.placement[s_.num_stages - 1] == w.device) {
    const int64_t per = task_.labels_per_sample();
    const auto n = static_cast<size_t>(rows * per);
    if (!dev.labels) TP_CUDA(cudaMalloc(&dev.labels, n * sizeof(int)));
    TP_CUDA(cudaMemcpyAsync(dev.labels, batch.labels.data() + first_sample * per, n * sizeof(int),
                            cudaMemcpyHostToDevice, dev.compute));
  }
  TP_CUDA(cudaMemsetAsync(dev.loss, 0, sizeof(double), dev.compute));
  cudaMemPool_t pool;
  TP_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev.gpu));
  uint64_t zero = 0;
  TP_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
  WaitIdle(dev, Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s)));
  dev.events.Reset();
  dev.pinned.Reset();
  std::fill(dev.arrived.begin(), dev.arrived.end(), nullptr);
  dev.op_events.assign(s_.programs[w.device].size(), {nullptr, nullptr});
  dev.times.assign(s_.programs[w.device].size(), {0.0, 0.0});
}

void CudaBackend::StartClock(const Worker& w, Clock::time_point) {
  Device& dev = *devices_[w.id];
  dev.origin = dev.events.Get();
  TP_CUDA(cudaEventRecord(dev.origin, dev.compute));
  for (cudaStream_t st : {dev.send, dev.recv, dev.allreduce}) TP_CUDA(cudaStreamWaitEvent(st, dev.origin));
  dev.account.Reset(Clock::now());
}

// An op's start event is recorded once what it waits for on the GPU is
// queued (the RECV that brought a compute op's input; for an all-reduce, the
// gradients; for STEP, the all-reduces), so that its measured time is its own.
void CudaBackend::BeginOp(const Worker& w, size_t i, const Op& op) {
  Device& dev = *devices_[w.id];
  DrainReturned(dev);
  auto& [start, end] = dev.op_events[i];
  start = dev.events.Get();
  end = dev.events.Get();
  if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput) {
    cudaEvent_t& arrived = Arrival(dev, op, op.kind != OpKind::kForward);
    if (arrived) TP_CUDA(cudaStreamWaitEvent(dev.compute, arrived));
    arrived = nullptr;
  } else if (op.kind == OpKind::kRecompute) {
    // After its gradient's receive in program order (recompute_timing
    // in-backward), R waits for it too; its B still waits and clears it.
    if (cudaEvent_t arrived = Arrival(dev, op, true)) TP_CUDA(cudaStreamWaitEvent(dev.compute, arrived));
  } else if (op.kind == OpKind::kAllReduce || op.kind == OpKind::kStep) {
    const bool gradients = op.kind == OpKind::kAllReduce;
    cudaEvent_t ready = dev.events.Get();
    TP_CUDA(cudaEventRecord(ready, gradients ? dev.compute : dev.allreduce));
    TP_CUDA(cudaStreamWaitEvent(gradients ? dev.allreduce : dev.compute, ready));
  }
  TP_CUDA(cudaEventRecord(start, StreamOf(dev, op.kind)));
}

void CudaBackend::Pack(const Worker& w, const Op& op, Tensor& t, Message& m) {
  Device& dev = *devices_[w.id];
  const Link link = LinkOf(w.device, op.peer);
  cudaEvent_t ready = dev.events.Get();
  TP_CUDA(cudaEventRecord(ready, dev.compute));
  TP_CUDA(cudaStreamWaitEvent(dev.send, ready));
  auto handoff = std::make_shared<Handoff>();
  handoff->gpu = dev.gpu;
  switch (link) {
    case Link::kLocal:
    case Link::kP2p:  // the receiver copies; the buffer is lent until then
      handoff->tensor = t;
      handoff->ready = ready;
      break;
    case Link::kHostStaged: {
      float* host = dev.pinned.Take(t.bytes());
      TP_CUDA(cudaMemcpyAsync(host, t.data(), static_cast<size_t>(t.bytes()), cudaMemcpyDeviceToHost, dev.send));
      cudaEvent_t copied = dev.events.Get();
      TP_CUDA(cudaEventRecord(copied, dev.send));
      handoff->host = host;
      handoff->ready = copied;
      t.FreeOn(dev.send);
      break;
    }
    case Link::kNccl: {
      const bool sent = dev.comms.Use(CommRole::kSend, op.peer, [&](ncclComm_t comm) {
        TP_CUDA(ncclSend(t.data(), static_cast<size_t>(t.size()), ncclFloat, 1, comm, dev.send));
      });
      if (!sent) throw Aborted();
      t.FreeOn(dev.send);
      break;
    }
  }
  if (!o_.mpi) m.handle = handoff;
  // `"p2p": "blocking"` (Megatron-LM's transfers): compute waits for the
  // send stream, as the simulator's comm-on-compute engine has it. On a
  // peer-copy link the copy is the receiver's, so this waits only for the
  // hand-off.
  if (c_.pipeline.blocking_p2p) {
    cudaEvent_t sent = dev.events.Get();
    TP_CUDA(cudaEventRecord(sent, dev.send));
    TP_CUDA(cudaStreamWaitEvent(dev.compute, sent));
  }
}

DeviceTensor CudaBackend::Unpack(const Worker& w, const Op& op, Message& m) {
  Device& dev = *devices_[w.id];
  DeviceTensor t(&dev.account, dev.recv, m.rows, m.cols);
  const auto bytes = static_cast<size_t>(t.bytes());
  auto* h = static_cast<Handoff*>(m.handle.get());
  const Link link = LinkOf(op.peer, w.device);
  if (link != Link::kNccl && !h) throw CudaError("a message without its payload");
  switch (link) {
    case Link::kLocal:
    case Link::kP2p: {
      TP_CUDA(cudaStreamWaitEvent(dev.recv, h->ready));
      if (h->gpu == dev.gpu) {
        TP_CUDA(cudaMemcpyAsync(t.data(), h->tensor.data(), bytes, cudaMemcpyDeviceToDevice, dev.recv));
      } else {
        TP_CUDA(cudaMemcpyPeerAsync(t.data(), dev.gpu, h->tensor.data(), h->gpu, bytes, dev.recv));
      }
      cudaEvent_t copied = dev.events.Get();
      TP_CUDA(cudaEventRecord(copied, dev.recv));
      Device& sender = *devices_[w.replica * D_ + op.peer];
      std::lock_guard lock(sender.returned_mu);
      sender.returned.push_back(Returned{std::move(h->tensor), copied});
      break;
    }
    case Link::kHostStaged:
      TP_CUDA(cudaStreamWaitEvent(dev.recv, h->ready));
      TP_CUDA(cudaMemcpyAsync(t.data(), h->host, bytes, cudaMemcpyHostToDevice, dev.recv));
      break;
    case Link::kNccl: {
      const bool received = dev.comms.Use(CommRole::kRecv, op.peer, [&](ncclComm_t comm) {
        TP_CUDA(ncclRecv(t.data(), static_cast<size_t>(t.size()), ncclFloat, 0, comm, dev.recv));
      });
      if (!received) throw Aborted();
      break;
    }
  }
  cudaEvent_t arrived = dev.events.Get();
  TP_CUDA(cudaEventRecord(arrived, dev.recv));
  t.FreeOn(dev.compute);  // used, and dropped, by compute after it waits on `arrived`
  if (c_.pipeline.blocking_p2p) TP_CUDA(cudaStreamWaitEvent(dev.compute, arrived));  // a blocking receive
  Arrival(dev, op, op.kind == OpKind::kRecvB) = arrived;
  return t;
}

// On the all-reduce stream, after the gradients (BeginOp): NCCL averages
// each parameter's gradient over the replicas of this device.
void CudaBackend::AllReduce(const Worker& w, size_t, const Op&, const std::vector<Param*>& params) {
  Device& dev = *devices_[w.id];
  const bool reduced = dev.comms.Use(CommRole::kReplica, 0, [&](ncclComm_t comm) {
    TP_CUDA(ncclGroupStart());
    for (DeviceParam* p : params) {
      TP_CUDA(ncclAllReduce(p->grad.get(), p->grad.get(), static_cast<size_t>(p->grad.size()), ncclFloat, ncclAvg,
                            comm, dev.allreduce));
    }
    TP_CUDA(ncclGroupEnd());
  });
  if (!reduced) throw Aborted();
}

void CudaBackend::AfterStep(const Worker& w, Clock::time_point deadline) {
  Device& dev = *devices_[w.id];
  DrainReturned(dev);
  WaitIdle(dev, deadline);
  for (size_t i = 0; i < dev.op_events.size(); ++i) {
    float start_ms = 0, end_ms = 0;
    TP_CUDA(cudaEventElapsedTime(&start_ms, dev.origin, dev.op_events[i].first));
    TP_CUDA(cudaEventElapsedTime(&end_ms, dev.origin, dev.op_events[i].second));
    dev.times[i] = {start_ms * 1e-3, end_ms * 1e-3};
  }
  TP_CUDA(cudaMemcpy(&dev.loss_host, dev.loss, sizeof(double), cudaMemcpyDeviceToHost));
  cudaMemPool_t pool;
  TP_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev.gpu));
  uint64_t high = 0;
  TP_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
  dev.pool_peak = std::max<int64_t>(dev.pool_peak, static_cast<int64_t>(high));
  size_t free = 0, total = 0;
  TP_CUDA(cudaMemGetInfo(&free, &total));
  dev.used = static_cast<int64_t>(total - free);
}

void CudaBackend::Finish(ExecuteResult& r) {
  const size_t n = static_cast<size_t>(D_) * R_;
  r.allocator_peak_bytes.assign(n, 0);
  r.device_used_bytes.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    if (!devices_[id]) continue;
    r.allocator_peak_bytes[id] = static_cast<double>(devices_[id]->pool_peak);
    r.device_used_bytes[id] = static_cast<double>(devices_[id]->used);
  }
  if (o_.mpi) {
    SumAcrossRanks(r.allocator_peak_bytes);
    SumAcrossRanks(r.device_used_bytes);
  }
  for (const auto& [pair, link] : links_) r.links.push_back(fmt::format("{}->{} {}", pair.first, pair.second, LinkName(link)));
}

}  // namespace
}  // namespace cuda

Result<ExecuteResult> ExecuteCuda(const cost::Config& config, const cost::Plan& plan,
                                  const ExecuteOptions& options) {
  if (auto ok = CheckExecutable(config); !ok) return tl::unexpected(ok.error());
  const Result<OptimizerKind> optimizer = OptimizerOf(config);
  if (!optimizer) return tl::unexpected(optimizer.error());
  try {
    cuda::CudaBackend backend(config, plan, options, *optimizer);
    Walker<cuda::CudaBackend> walker(backend, config, plan, options, "execute:cuda");
    auto result = walker.Run();
    if (result) backend.Finish(*result);
    return result;
  } catch (const cuda::CudaError& e) {  // setting up, or reading the parameters back
    return FailRuntime(fmt::format("the CUDA backend: {}", e.what()));
  }
}

}  // namespace twinpipe::execute
