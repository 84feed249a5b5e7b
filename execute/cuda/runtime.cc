// The CUDA backend's runtime: the CPU runtime's walk over each device's
// program (execute/runtime.cc), with the work queued on CUDA streams.
//
// Each pipeline device has a host thread, a GPU (device d on GPU d mod the
// GPUs, or the rank's local GPU under MPI) and three streams: compute, send
// and recv. The host thread only queues work; streams are ordered by events,
// so transfers overlap compute as the simulator assumes. Every op is timed
// by a pair of CUDA events on its stream, read after the step.
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
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "execute/cuda/check.h"
#include "execute/cuda/from_cpu.h"
#include "execute/cuda/layers/softmax_cross_entropy.h"
#include "execute/cuda/optimizer.h"
#include "execute/model.h"
#include "execute/mpi.h"
#include "execute/runtime.h"
#include "execute/transport.h"

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

// A barrier for the device threads of one step that a failure can open.
class StepBarrier {
 public:
  explicit StepBarrier(int parties) : parties_(parties) {}
  bool Arrive() {
    std::unique_lock lock(mu_);
    const int64_t gen = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return aborted_ || generation_ != gen; });
    }
    return !aborted_;
  }
  void Abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int parties_, arrived_ = 0;
  int64_t generation_ = 0;
  bool aborted_ = false;
};

Result<Precision> ParsePrecision(const std::string& p) {
  if (p == "fp32") return Precision::kFp32;
  if (p == "tf32") return Precision::kTf32;
  if (p == "bf16") return Precision::kBf16;
  return Fail(fmt::format("--precision: expected fp32, tf32 or bf16, got '{}'", p));
}

struct Cell {
  int stage = 0;
  std::vector<std::unique_ptr<Layer>> layers;
  size_t rematerialized = 0;  // R re-runs layers [0, this); the rest keep F's activations
  struct Slot {
    DeviceTensor input, output, grad_output, grad_input;
    std::vector<Saved> saved;
    cudaEvent_t input_arrived = nullptr, grad_arrived = nullptr;  // set by RECV ops
  };
  std::vector<Slot> slots;
};

// One pipeline device: its GPU, streams, memory and what its ops leave.
struct Device {
  int gpu = 0;
  cudaStream_t compute = nullptr, send = nullptr, recv = nullptr;
  cublasHandle_t blas = nullptr;
  MemoryAccount account;
  Context ctx;
  EventPool events;
  PinnedArena pinned;
  cudaEvent_t origin = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> op_events;  // by position in the program
  std::map<int, ncclComm_t> send_comm, recv_comm;              // by peer device
  std::mutex returned_mu;
  std::vector<Returned> returned;
  DeviceTensor batch;             // stage 0: this step's inputs (not counted)
  int* labels = nullptr;          // last stage: this step's labels
  double* loss = nullptr;         // last stage: the step's summed loss
  double loss_host = 0;
  int64_t pool_peak = 0;
  int64_t used = 0;  // cudaMemGetInfo's total - free, at the end of the step
  Clock::time_point host_start, host_end;  // this step: clock started, streams idle

  ~Device() {
    static_cast<void>(cudaSetDevice(gpu));
    // Tensors first: they are freed on the streams below.
    returned.clear();
    batch.Release();
    static_cast<void>(cudaDeviceSynchronize());
    if (labels) static_cast<void>(cudaFree(labels));
    if (loss) static_cast<void>(cudaFree(loss));
    for (auto* comms : {&send_comm, &recv_comm}) {
      for (auto& [peer, c] : *comms) static_cast<void>(ncclCommDestroy(c));
    }
    if (blas) static_cast<void>(cublasDestroy(blas));
    for (cudaStream_t s : {compute, send, recv}) {
      if (s) static_cast<void>(cudaStreamDestroy(s));
    }
  }
};

class Runner {
 public:
  Runner(const cost::Config& c, const partition::Plan& plan, const ExecuteOptions& o)
      : c_(c), plan_(plan), s_(plan.schedule), o_(o), task_(c) {}
  Result<ExecuteResult> Run();

 private:
  Result<void> Setup();
  Result<void> SetupComms();
  bool Mine(int device) const { return !o_.mpi || device == rank_; }
  void Worker(int device, int step);
  void WaitForInputs(Device& dev, const Op& op);
  void RunOp(int device, const Op& op, int step, Clock::time_point deadline);
  void Send(int device, const Op& op, DeviceTensor& t, Clock::time_point deadline);
  void Recv(int device, const Op& op, Clock::time_point deadline);
  void DrainReturned(Device& dev);
  void WaitIdle(int device, Clock::time_point deadline);
  void FailWith(std::string message, ErrorKind kind);
  std::string Where(const Op& op, int device) const { return fmt::format("device {}: {}", device, ir::OpToken(op)); }
  Link LinkOf(int src, int dst) const { return links_.at({src, dst}); }

  const cost::Config& c_;
  const partition::Plan& plan_;
  const ir::Schedule& s_;
  ExecuteOptions o_;
  SyntheticTask task_;
  SyntheticTask::Batch batch_;
  Precision precision_ = Precision::kFp32;
  int rank_ = -1;
  int gpus_ = 0;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<Cell> cells_;
  std::vector<char> recomputed_;
  std::map<std::pair<int, int>, Link> links_;  // every (src, dst) that sends
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<StepBarrier> barrier_ = std::make_unique<StepBarrier>(1);
  std::vector<traces::Event> events_;
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::string error_;
  ErrorKind error_kind_ = ErrorKind::kRuntime;
};

void Runner::FailWith(std::string message, ErrorKind kind) {
  {
    std::lock_guard lock(error_mu_);
    if (error_.empty()) {
      error_ = std::move(message);
      error_kind_ = kind;
    }
  }
  failed_ = true;
  transport_->Abort();
  barrier_->Abort();
  // NCCL kernels waiting for a peer that will never come would hold the
  // streams forever: abort the communicators.
  for (auto& dev : devices_) {
    if (!dev) continue;
    for (auto* comms : {&dev->send_comm, &dev->recv_comm}) {
      for (auto& [peer, comm] : *comms) static_cast<void>(ncclCommAbort(comm));
      comms->clear();
    }
  }
}

Result<void> Runner::Setup() {
  if (auto ok = CheckSinglePipeline(c_, s_, "CUDA"); !ok) return ok;
  auto precision = ParsePrecision(o_.precision);
  if (!precision) return tl::unexpected(precision.error());
  precision_ = *precision;
  const cudaError_t count = cudaGetDeviceCount(&gpus_);
  if (count != cudaSuccess || gpus_ == 0) {
    return FailRuntime(fmt::format("no CUDA device: cudaGetDeviceCount says {} ({}); run with --backend cpu",
                                   count == cudaSuccess ? "0 devices" : cudaGetErrorName(count),
                                   count == cudaSuccess ? "none found" : cudaGetErrorString(count)));
  }
  const int D = s_.num_devices;
  int local_rank = 0;
  if (o_.mpi) {
    rank_ = InitMpi().rank;
    if (const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local_rank = std::atoi(lr);
    else if (const char* lr2 = std::getenv("MPI_LOCALRANKID")) local_rank = std::atoi(lr2);
    else local_rank = rank_;
    transport_ = std::make_unique<MpiTransport>();
  } else {
    transport_ = std::make_unique<InProcTransport>(D, 2 * static_cast<size_t>(s_.num_micro_batches) + 2);
    barrier_ = std::make_unique<StepBarrier>(D);
  }
  auto gpu_of = [&](int d) { return o_.mpi ? (d == rank_ ? local_rank % gpus_ : -1) : d % gpus_; };

  // Links: every ordered pair of devices a SEND joins.
  const std::string& want = o_.transport;
  for (const auto& p : s_.programs) {
    for (const Op& op : p) {
      if (!ir::IsSend(op.kind) || links_.count({op.device, op.peer})) continue;
      Link link;
      const int gs = gpu_of(op.device), gd = gpu_of(op.peer);
      const bool same = !o_.mpi && gs == gd;
      if (want == "auto") {
        if (o_.mpi) {
          link = Link::kNccl;
        } else if (same) {
          link = Link::kLocal;
        } else {
          int can = 0;
          TP_CUDA(cudaDeviceCanAccessPeer(&can, gs, gd));
          link = can ? Link::kP2p : Link::kHostStaged;
        }
      } else if (want == "local") {
        if (!same) {
          return Fail(fmt::format("--transport local: devices {} and {} are on different GPUs ({} GPUs{}); local "
                                  "joins stages on one GPU", op.device, op.peer, gpus_, o_.mpi ? ", one per rank" : ""));
        }
        link = Link::kLocal;
      } else if (want == "p2p" || want == "host-staged") {
        if (o_.mpi) {
          return Fail(fmt::format("--transport {}: joins devices of one process; between MPI ranks use nccl", want));
        }
        link = want == "p2p" ? Link::kP2p : Link::kHostStaged;
      } else if (want == "nccl") {
        if (same) {
          return Fail(fmt::format("--transport nccl: devices {} and {} share GPU {}, and NCCL joins ranks on "
                                  "different GPUs (use local, or more GPUs)", op.device, op.peer, gs));
        }
        link = Link::kNccl;
      } else {
        return Fail(fmt::format("--transport: expected auto, nccl, p2p, host-staged or local, got '{}'", want));
      }
      links_[{op.device, op.peer}] = link;
    }
  }

  devices_.resize(D);
  for (int d = 0; d < D; ++d) {
    if (!Mine(d)) continue;
    auto dev = std::make_unique<Device>();
    dev->gpu = gpu_of(d);
    TP_CUDA(cudaSetDevice(dev->gpu));
    // Keep freed blocks in the pool rather than returning them each sync.
    cudaMemPool_t pool;
    TP_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev->gpu));
    uint64_t keep = UINT64_MAX;
    TP_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    for (cudaStream_t* st : {&dev->compute, &dev->send, &dev->recv}) {
      TP_CUDA(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    }
    TP_CUDA(cublasCreate(&dev->blas));
    TP_CUDA(cudaMalloc(&dev->loss, sizeof(double)));
    dev->ctx = Context{dev->compute, dev->blas, &dev->account, precision_};
    devices_[d] = std::move(dev);
  }
  // Peer access for p2p links (already enabled is fine).
  for (const auto& [pair, link] : links_) {
    if (link != Link::kP2p || !Mine(pair.second)) continue;
    const int gd = devices_[pair.second]->gpu, gs = gpu_of(pair.first);
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
  if (auto ok = SetupComms(); !ok) return ok;

  // The model: the CPU twin's layers, converted, on each stage's device.
  cells_.resize(s_.num_stages);
  for (int st = 0; st < s_.num_stages; ++st) {
    const int d = s_.placement[st];
    cells_[st].stage = st;
    cells_[st].slots.assign(s_.num_micro_batches, Cell::Slot{});
    cells_[st].rematerialized = static_cast<size_t>(
        cost::RematerializedEnd(c_.model, plan_.partition.cells[st].first_layer, plan_.partition.cells[st].last_layer) -
        plan_.partition.cells[st].first_layer);
    if (!Mine(d)) continue;
    TP_CUDA(cudaSetDevice(devices_[d]->gpu));
    const auto& cell = plan_.partition.cells[st];
    auto cpu = BuildLayers(c_, cell.first_layer, cell.last_layer);
    for (auto& layer : cpu) {
      auto gpu = FromCpu(*layer);
      if (!gpu) return tl::unexpected(gpu.error());
      cells_[st].layers.push_back(std::move(*gpu));
    }
    // Parameters, gradients and optimizer state (m, v) live all along.
    for (auto& layer : cells_[st].layers) {
      for (DeviceParam* p : layer->Params()) devices_[d]->account.Add(p->value.size() * 16);
    }
    TP_CUDA(cudaDeviceSynchronize());
  }
  recomputed_.assign(static_cast<size_t>(s_.num_stages) * s_.num_micro_batches, 0);
  for (const auto& p : s_.programs) {
    for (const Op& op : p) {
      if (op.kind == OpKind::kRecompute) recomputed_[static_cast<size_t>(op.stage) * s_.num_micro_batches + op.micro_batch] = 1;
    }
  }
  return {};
}

// A two-rank communicator per ordered pair with an NCCL link: the sender is
// rank 0, the receiver rank 1, and each side drives it from one stream.
Result<void> Runner::SetupComms() {
  std::vector<std::pair<int, int>> pairs;
  for (const auto& [pair, link] : links_) {
    if (link == Link::kNccl) pairs.push_back(pair);
  }
  if (pairs.empty()) return {};
  if (!o_.mpi) {
    for (const auto& [src, dst] : pairs) {
      ncclComm_t comms[2];
      const int gpus[2] = {devices_[src]->gpu, devices_[dst]->gpu};
      TP_CUDA(ncclCommInitAll(comms, 2, gpus));
      devices_[src]->send_comm[dst] = comms[0];
      devices_[dst]->recv_comm[src] = comms[1];
    }
    return {};
  }
  // Under MPI: one world communicator from rank 0's id, split per pair.
  ncclUniqueId id;
  if (rank_ == 0) TP_CUDA(ncclGetUniqueId(&id));
  BroadcastBytes(&id, sizeof(id), 0);
  TP_CUDA(cudaSetDevice(devices_[rank_]->gpu));
  ncclComm_t world;
  TP_CUDA(ncclCommInitRank(&world, s_.num_devices, id, rank_));
  for (const auto& [src, dst] : pairs) {  // std::map order: the same on every rank
    const bool in = rank_ == src || rank_ == dst;
    ncclComm_t comm = nullptr;
    TP_CUDA(ncclCommSplit(world, in ? 0 : NCCL_SPLIT_NOCOLOR, rank_ == src ? 0 : 1, &comm, nullptr));
    if (rank_ == src) devices_[src]->send_comm[dst] = comm;
    if (rank_ == dst) devices_[dst]->recv_comm[src] = comm;
  }
  TP_CUDA(ncclCommDestroy(world));
  return {};
}

void Runner::DrainReturned(Device& dev) {
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

void Runner::Send(int device, const Op& op, DeviceTensor& t, Clock::time_point deadline) {
  Device& dev = *devices_[device];
  const Link link = LinkOf(device, op.peer);
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
    case Link::kNccl:
      TP_CUDA(ncclSend(t.data(), static_cast<size_t>(t.size()), ncclFloat, 1, dev.send_comm.at(op.peer), dev.send));
      t.FreeOn(dev.send);
      break;
  }
  Message m{op.kind, op.stage, op.micro_batch, t.rows(), t.cols(), {}, nullptr};
  if (!o_.mpi) m.handle = handoff;
  t.Release();
  const auto status = transport_->Send(device, op.peer, std::move(m), deadline);
  if (status == Transport::Status::kTimeout) {
    throw CudaError(fmt::format("timed out after {} s waiting to send to device {}", o_.timeout_s, op.peer));
  }
  if (status == Transport::Status::kAborted) throw CudaError("aborted");
}

void Runner::Recv(int device, const Op& op, Clock::time_point deadline) {
  Device& dev = *devices_[device];
  Message m;
  const auto status = transport_->Recv(op.peer, device, m, deadline);
  if (status == Transport::Status::kTimeout) {
    throw CudaError(fmt::format("timed out after {} s waiting to receive from device {}", o_.timeout_s, op.peer));
  }
  if (status == Transport::Status::kAborted) throw CudaError("aborted");
  const bool forward = op.kind == OpKind::kRecvF;
  const int32_t expected_stage = forward ? op.stage - 1 : op.stage + 1;
  if (m.kind != (forward ? OpKind::kSendF : OpKind::kSendB) || m.stage != expected_stage ||
      m.micro_batch != op.micro_batch) {
    throw CudaError(fmt::format("received {} instead",
                                ir::OpToken(Op{.kind = m.kind, .stage = m.stage, .micro_batch = m.micro_batch})));
  }
  DeviceTensor t(&dev.account, dev.recv, m.rows, m.cols);
  const auto bytes = static_cast<size_t>(t.bytes());
  auto* h = static_cast<Handoff*>(m.handle.get());
  switch (LinkOf(op.peer, device)) {
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
      Device& sender = *devices_[op.peer];
      std::lock_guard lock(sender.returned_mu);
      sender.returned.push_back(Returned{std::move(h->tensor), copied});
      break;
    }
    case Link::kHostStaged:
      TP_CUDA(cudaStreamWaitEvent(dev.recv, h->ready));
      TP_CUDA(cudaMemcpyAsync(t.data(), h->host, bytes, cudaMemcpyHostToDevice, dev.recv));
      break;
    case Link::kNccl:
      TP_CUDA(ncclRecv(t.data(), static_cast<size_t>(t.size()), ncclFloat, 0, dev.recv_comm.at(op.peer), dev.recv));
      break;
  }
  cudaEvent_t arrived = dev.events.Get();
  TP_CUDA(cudaEventRecord(arrived, dev.recv));
  t.FreeOn(dev.compute);  // used, and dropped, by compute after it waits on `arrived`
  Cell::Slot& slot = cells_[op.stage].slots[op.micro_batch];
  if (forward) {
    slot.input = std::move(t);
    slot.input_arrived = arrived;
  } else {
    slot.grad_output = std::move(t);
    slot.grad_arrived = arrived;
  }
}

void Runner::RunOp(int device, const Op& op, int step, Clock::time_point deadline) {
  Device& dev = *devices_[device];
  const Context& ctx = dev.ctx;
  const int M = s_.num_micro_batches;
  const auto mb = static_cast<int>(c_.training.MicroBatchSize());
  const bool last_stage = op.stage == s_.num_stages - 1;
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kRecompute: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      const bool first = op.kind == OpKind::kForward;
      if (first && op.stage == 0) {
        const int cols = task_.input_cols();
        slot.input = ctx.Alloc(mb, cols);
        TP_CUDA(cudaMemcpyAsync(slot.input.data(), dev.batch.Rows(op.micro_batch * mb, mb).data(),
                                static_cast<size_t>(slot.input.bytes()), cudaMemcpyDeviceToDevice, dev.compute));
      } else if (first && s_.placement[op.stage - 1] == device) {
        slot.input = std::move(cells_[op.stage - 1].slots[op.micro_batch].output);
      }
      if (slot.input.empty()) throw CudaError("its input never arrived");
      const bool keep = !first || !recomputed_[static_cast<size_t>(op.stage) * M + op.micro_batch];
      // R re-runs the rematerialized layers only; F keeps what R does not re-run.
      if (!first && slot.saved.size() != cell.layers.size()) throw CudaError("its forward has not run");
      if (first) slot.saved.assign(cell.layers.size(), Saved{});
      const size_t run = first ? cell.layers.size() : cell.rematerialized;
      DeviceTensor h = slot.input;
      for (size_t i = 0; i < run; ++i) {
        if (!first) slot.saved[i] = Saved{};
        h = cell.layers[i]->Forward(ctx, h, slot.saved[i], first ? Mode::kTrain : Mode::kRecompute);
      }
      if (!keep) {
        for (size_t i = 0; i < cell.rematerialized; ++i) slot.saved[i] = Saved{};
      }
      if (!first) return;
      if (last_stage) {
        const int per = task_.labels_per_sample();
        slot.grad_output = SoftmaxCrossEntropy(ctx, h, dev.labels + static_cast<ptrdiff_t>(op.micro_batch) * mb * per,
                                               static_cast<double>(c_.training.batch * per), dev.loss);
      } else {
        slot.output = std::move(h);
      }
      return;
    }
    case OpKind::kBackward:
    case OpKind::kBackwardInput: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      if (!last_stage && s_.placement[op.stage + 1] == device) {
        slot.grad_output = std::move(cells_[op.stage + 1].slots[op.micro_batch].grad_input);
      }
      if (slot.grad_output.empty() || slot.saved.size() != cell.layers.size()) {
        throw CudaError("its output gradient or saved activations are missing");
      }
      const bool whole = op.kind == OpKind::kBackward;
      DeviceTensor g = slot.grad_output;
      for (size_t i = cell.layers.size(); i-- > 0;) {
        g = whole ? cell.layers[i]->Backward(ctx, g, slot.saved[i]) : cell.layers[i]->BackwardInput(ctx, g, slot.saved[i]);
      }
      if (whole) slot.saved.clear();
      slot.input.Release();
      slot.grad_output.Release();
      if (op.stage > 0) slot.grad_input = std::move(g);
      return;
    }
    case OpKind::kBackwardWeight: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      if (slot.saved.size() != cell.layers.size()) throw CudaError("its input-gradient pass (I) has not run");
      for (size_t i = 0; i < cell.layers.size(); ++i) cell.layers[i]->BackwardWeight(ctx, slot.saved[i]);
      slot.saved.clear();
      return;
    }
    case OpKind::kSendF:
    case OpKind::kSendB: {
      Cell::Slot& slot = cells_[op.stage].slots[op.micro_batch];
      Send(device, op, op.kind == OpKind::kSendF ? slot.output : slot.grad_input, deadline);
      return;
    }
    case OpKind::kRecvF:
    case OpKind::kRecvB:
      Recv(device, op, deadline);
      return;
    case OpKind::kStep:
      for (Cell& cell : cells_) {
        if (s_.placement[cell.stage] != device) continue;
        for (auto& layer : cell.layers) {
          for (DeviceParam* p : layer->Params()) {
            Apply(ctx, c_.training.optimizer, c_.training.learning_rate, c_.training.momentum, step + 1, *p);
          }
          layer->EndStep(ctx);
        }
      }
      return;
    default:
      throw CudaError(fmt::format("the CUDA backend does not run {} ops yet", ir::OpKindName(op.kind)));
  }
}

// Waits for the device's three streams, polling so that a stuck stream ends
// in a timeout rather than a hang.
void Runner::WaitIdle(int device, Clock::time_point deadline) {
  Device& dev = *devices_[device];
  for (cudaStream_t st : {dev.compute, dev.send, dev.recv}) {
    for (;;) {
      const cudaError_t e = cudaStreamQuery(st);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) TP_CUDA(e);
      if (failed_) throw CudaError("aborted");
      if (Clock::now() > deadline) {
        throw CudaError(fmt::format("timed out after {} s waiting for the GPU work of its step", o_.timeout_s));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// A compute op waits (on the GPU) for the RECV that brought its input, before
// its start event, so that its measured time is its own.
void Runner::WaitForInputs(Device& dev, const Op& op) {
  const bool forward = op.kind == OpKind::kForward;
  if (!forward && op.kind != OpKind::kBackward && op.kind != OpKind::kBackwardInput) return;
  Cell::Slot& slot = cells_[op.stage].slots[op.micro_batch];
  cudaEvent_t& arrived = forward ? slot.input_arrived : slot.grad_arrived;
  if (arrived) TP_CUDA(cudaStreamWaitEvent(dev.compute, arrived));
  arrived = nullptr;
}

void Runner::Worker(int device, int step) {
  const Op* current = nullptr;
  auto fail = [&](const std::string& what) {
    if (what == "aborted") return FailWith("aborted", ErrorKind::kRuntime);
    FailWith(current ? fmt::format("{} failed: {}", Where(*current, device), what)
                     : fmt::format("device {}: {}", device, what), ErrorKind::kRuntime);
  };
  try {
    Device& dev = *devices_[device];
    TP_CUDA(cudaSetDevice(dev.gpu));
    const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
    // Before the clock starts: this step's data on the devices that use it.
    if (s_.placement[0] == device) {
      dev.batch = DeviceTensor(nullptr, dev.compute, static_cast<int>(c_.training.batch), task_.input_cols());
      TP_CUDA(cudaMemcpyAsync(dev.batch.data(), batch_.inputs.data(), static_cast<size_t>(dev.batch.bytes()),
                              cudaMemcpyHostToDevice, dev.compute));
    }
    if (s_.placement[s_.num_stages - 1] == device) {
      if (!dev.labels) TP_CUDA(cudaMalloc(&dev.labels, batch_.labels.size() * sizeof(int)));
      TP_CUDA(cudaMemcpyAsync(dev.labels, batch_.labels.data(), batch_.labels.size() * sizeof(int),
                              cudaMemcpyHostToDevice, dev.compute));
    }
    TP_CUDA(cudaMemsetAsync(dev.loss, 0, sizeof(double), dev.compute));
    cudaMemPool_t pool;
    TP_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev.gpu));
    uint64_t zero = 0;
    TP_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
    WaitIdle(device, Clock::now() + timeout);
    dev.events.Reset();
    dev.pinned.Reset();
    if (!barrier_->Arrive()) return;
    dev.origin = dev.events.Get();
    TP_CUDA(cudaEventRecord(dev.origin, dev.compute));
    TP_CUDA(cudaStreamWaitEvent(dev.send, dev.origin));
    TP_CUDA(cudaStreamWaitEvent(dev.recv, dev.origin));
    dev.host_start = Clock::now();
    dev.account.Reset(dev.host_start);
    const auto& program = s_.programs[device];
    dev.op_events.assign(program.size(), {nullptr, nullptr});
    for (size_t i = 0; i < program.size(); ++i) {
      const Op& op = program[i];
      current = &op;
      if (failed_) return;
      if (op.id == o_.fail_op) throw CudaError("injected fault");
      DrainReturned(dev);
      const cudaStream_t stream = ir::IsSend(op.kind) ? dev.send : ir::IsRecv(op.kind) ? dev.recv : dev.compute;
      auto& [start, end] = dev.op_events[i];
      start = dev.events.Get();
      end = dev.events.Get();
      WaitForInputs(dev, op);
      TP_CUDA(cudaEventRecord(start, stream));
      RunOp(device, op, step, Clock::now() + timeout);
      TP_CUDA(cudaEventRecord(end, stream));
    }
    current = nullptr;
    WaitIdle(device, Clock::now() + timeout);
    dev.host_end = Clock::now();
    // Every receiver has queued its copies of this device's lent buffers
    // once all devices are here.
    if (!barrier_->Arrive()) return;
    DrainReturned(dev);
    WaitIdle(device, Clock::now() + timeout);
    for (size_t i = 0; i < program.size(); ++i) {
      const Op& op = program[i];
      float start_ms = 0, end_ms = 0;
      TP_CUDA(cudaEventElapsedTime(&start_ms, dev.origin, dev.op_events[i].first));
      TP_CUDA(cudaEventElapsedTime(&end_ms, dev.origin, dev.op_events[i].second));
      events_[op.id] = traces::Event{op.id, device, StreamOf(op.kind), op.kind, op.stage, op.micro_batch, op.peer,
                                     start_ms * 1e-3, end_ms * 1e-3, op.bytes};
    }
    TP_CUDA(cudaMemcpy(&dev.loss_host, dev.loss, sizeof(double), cudaMemcpyDeviceToHost));
    uint64_t high = 0;
    TP_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
    dev.pool_peak = std::max<int64_t>(dev.pool_peak, static_cast<int64_t>(high));
    size_t free = 0, total = 0;
    TP_CUDA(cudaMemGetInfo(&free, &total));
    dev.used = static_cast<int64_t>(total - free);
  } catch (const std::exception& e) {  // CUDA, cuBLAS and NCCL failures (CudaError) and any other
    fail(e.what());
  }
}

Result<ExecuteResult> Runner::Run() {
  try {
    if (auto ok = Setup(); !ok) return tl::unexpected(ok.error());
  } catch (const CudaError& e) {
    return FailRuntime(fmt::format("setting up the CUDA backend: {}", e.what()));
  }
  const int D = s_.num_devices;
  ExecuteResult result;
  result.peak_memory_bytes.assign(D, 0);
  result.allocator_peak_bytes.assign(D, 0);
  result.device_used_bytes.assign(D, 0);
  for (const auto& [pair, link] : links_) {
    result.links.push_back(fmt::format("{}->{} {}", pair.first, pair.second, LinkName(link)));
  }
  std::vector<std::vector<traces::Event>> step_events;
  std::vector<std::vector<std::vector<traces::MemorySample>>> step_memory;
  events_.assign(s_.NumOps(), traces::Event{});
  for (int step = 0; step < o_.steps; ++step) {
    batch_ = task_.Make(step);
    if (o_.mpi) Barrier();
    std::vector<std::thread> workers;
    for (int d = 0; d < D; ++d) {
      if (Mine(d)) workers.emplace_back([this, d, step] { Worker(d, step); });
    }
    for (auto& w : workers) w.join();
    if (failed_) return tl::unexpected(Error{error_, error_kind_});
    // The step's time: from the clocks' start (together, after a barrier)
    // to the last device's streams idle.
    Clock::time_point first = Clock::time_point::max(), last = Clock::time_point::min();
    for (int d = 0; d < D; ++d) {
      if (!Mine(d)) continue;
      first = std::min(first, devices_[d]->host_start);
      last = std::max(last, devices_[d]->host_end);
    }
    result.step_time_s.push_back(std::chrono::duration<double>(last - first).count());
    std::vector<double> loss_sum(D, 0.0);
    for (int d = 0; d < D; ++d) {
      if (Mine(d)) loss_sum[d] = devices_[d]->loss_host;
    }
    if (o_.mpi) {
      static_cast<MpiTransport*>(transport_.get())->Flush();
      GatherStepAcrossRanks(s_, rank_, devices_[rank_]->account.peak_bytes(), loss_sum, result.step_time_s.back(),
                            result.peak_memory_bytes, events_);
    }
    double loss = 0;
    for (double l : loss_sum) loss += l;
    result.losses.push_back(loss / static_cast<double>(c_.training.batch * task_.labels_per_sample()));
    if (!std::isfinite(result.losses.back())) {
      return FailRuntime(fmt::format("step {}: the loss is {} (stage {})", step + 1, result.losses.back(),
                                     s_.num_stages - 1));
    }
    auto& memory = step_memory.emplace_back();
    for (int d = 0; d < D; ++d) {
      auto& samples = memory.emplace_back();
      if (!Mine(d)) continue;
      result.peak_memory_bytes[d] = std::max(result.peak_memory_bytes[d],
                                             static_cast<double>(devices_[d]->account.peak_bytes()));
      result.allocator_peak_bytes[d] = static_cast<double>(devices_[d]->pool_peak);
      result.device_used_bytes[d] = static_cast<double>(devices_[d]->used);
      for (const auto& [time, bytes] : devices_[d]->account.samples()) samples.push_back({time, bytes});
    }
    step_events.push_back(events_);
  }
  if (o_.mpi) {
    SumAcrossRanks(result.allocator_peak_bytes);
    SumAcrossRanks(result.device_used_bytes);
  }
  for (Cell& cell : cells_) {
    const int d = s_.placement[cell.stage];
    if (!Mine(d)) {
      // Another rank's stage: its parameters come from that rank below.
      auto cpu = BuildLayers(c_, plan_.partition.cells[cell.stage].first_layer, plan_.partition.cells[cell.stage].last_layer);
      for (auto& layer : cpu) {
        for (Param* p : layer->Params()) result.parameters.insert(result.parameters.end(), p->value.size(), 0.f);
      }
      continue;
    }
    TP_CUDA(cudaSetDevice(devices_[d]->gpu));
    for (auto& layer : cell.layers) {
      for (DeviceParam* p : layer->Params()) {
        const size_t at = result.parameters.size();
        result.parameters.resize(at + static_cast<size_t>(p->value.size()));
        TP_CUDA(cudaMemcpy(result.parameters.data() + at, p->value.get(), static_cast<size_t>(p->value.size()) * 4,
                           cudaMemcpyDeviceToHost));
      }
    }
  }
  if (o_.mpi) SumAcrossRanks(result.parameters);
  double sq = 0;
  for (float v : result.parameters) sq += static_cast<double>(v) * v;
  result.param_norm = std::sqrt(sq);
  result.trace = MedianStepTrace("execute:cuda", s_, result.step_time_s, step_events, step_memory);
  return result;
}

}  // namespace
}  // namespace cuda

Result<ExecuteResult> ExecuteCuda(const cost::Config& config, const partition::Plan& plan,
                                  const ExecuteOptions& options) {
  if (auto ok = CheckExecutable(config); !ok) return tl::unexpected(ok.error());
  try {
    cuda::Runner runner(config, plan, options);
    return runner.Run();
  } catch (const cuda::CudaError& e) {
    return FailRuntime(e.what());
  }
}

}  // namespace twinpipe::execute
