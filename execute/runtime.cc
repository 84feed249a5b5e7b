#include "execute/runtime.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "execute/gemm.h"
#include "execute/layers/softmax_cross_entropy.h"
#include "execute/model.h"
#include "execute/mpi.h"
#include "execute/optimizer.h"
#include "execute/transport.h"

namespace twinpipe::execute {
namespace {

using ir::Op;
using ir::OpKind;
using Clock = std::chrono::steady_clock;

// One stage's cell on its device: its layers, and per micro-batch what the
// schedule's ops hand to each other.
struct Cell {
  int stage = 0;
  std::vector<std::unique_ptr<Layer>> layers;
  size_t rematerialized = 0;    // R re-runs layers [0, this); the rest keep F's activations
  struct Slot {
    Tensor input;               // the boundary input, kept for R and B
    std::vector<Saved> saved;   // per layer, unless recomputed
    Tensor output;              // activation for the next stage
    Tensor grad_output;         // gradient of the output (from the loss or the next stage)
    Tensor grad_input;          // gradient for the previous stage
  };
  std::vector<Slot> slots;      // per micro-batch
};

// Keeps device d's worker on core d (mod the cores there are): fewer
// migrations, steadier step times. Advice only: failures are ignored.
void PinToCore(int device) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<int>(static_cast<unsigned>(device) % cores), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Runs f when it goes out of scope.
template <typename F>
struct ScopeExit {
  F f;
  ~ScopeExit() { f(); }
};
template <typename F>
ScopeExit(F) -> ScopeExit<F>;  // clang 14 deduces no aggregate's arguments by itself

// Tensors come and go every op; glibc would hand large blocks back to the
// kernel (munmap, heap trimming) and fault them in again on the next step, a
// cost that varies step to step and that no training framework's caching
// allocator pays. Keep freed memory in the process instead.
void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

class Runner {
 public:
  Runner(const cost::Config& c, const partition::Plan& plan, const ExecuteOptions& o)
      : c_(c), s_(plan.schedule), o_(o), task_(c), accounts_(s_.num_devices), cells_(s_.num_stages) {
    if (o.mpi) {
      rank_ = InitMpi().rank;
      transport_ = std::make_unique<MpiTransport>();
    } else {
      const bool core_each = s_.num_devices <= static_cast<int>(std::thread::hardware_concurrency());
      transport_ = std::make_unique<InProcTransport>(s_.num_devices, 2 * static_cast<size_t>(s_.num_micro_batches) + 2,
                                                     std::chrono::microseconds(core_each ? 500 : 0));
    }
    optimizer_ = Optimizer{c.training.optimizer, c.training.learning_rate, c.training.momentum};
    for (int st = 0; st < s_.num_stages; ++st) {
      const auto& cell = plan.partition.cells[st];
      cells_[st].stage = st;
      cells_[st].layers = BuildLayers(c, cell.first_layer, cell.last_layer);
      cells_[st].rematerialized =
          static_cast<size_t>(cost::RematerializedEnd(c.model, cell.first_layer, cell.last_layer) - cell.first_layer);
    }
    recomputed_.assign(static_cast<size_t>(s_.num_stages) * s_.num_micro_batches, 0);
    for (const auto& p : s_.programs) {
      for (const Op& op : p) {
        if (op.kind == OpKind::kRecompute) recomputed_[static_cast<size_t>(op.stage) * s_.num_micro_batches + op.micro_batch] = 1;
      }
    }
  }

  Result<ExecuteResult> Run();

 private:
  Result<void> Worker(int device, int step, Clock::time_point origin);
  // Under MPI, after a step: every rank gets the loss, the slowest rank's
  // step time, every device's peak memory and every op's times.
  void GatherStep(ExecuteResult& result);
  Result<void> RunOp(int device, const Op& op, int step);
  Tensor Forward(Cell& cell, Cell::Slot& slot, const Tensor& x, Mode mode, bool keep);
  // R: re-runs the cell's rematerialized layers from the boundary input.
  void Recompute(Cell& cell, Cell::Slot& slot);
  std::string Where(const Op& op, int device) const { return fmt::format("device {}: {}", device, ir::OpToken(op)); }

  const cost::Config& c_;
  const ir::Schedule& s_;
  ExecuteOptions o_;
  SyntheticTask task_;
  SyntheticTask::Batch batch_;
  std::unique_ptr<Transport> transport_;
  int rank_ = -1;  // under MPI: the one device this process runs
  std::vector<MemoryAccount> accounts_;
  std::vector<Cell> cells_;
  std::vector<char> recomputed_;
  Optimizer optimizer_;
  std::vector<double> loss_sum_;       // per device, this step
  std::vector<traces::Event> events_;  // this step, by op id
  Clock::time_point origin_;
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::string error_;
  ErrorKind error_kind_ = ErrorKind::kRuntime;
};

Tensor Runner::Forward(Cell& cell, Cell::Slot& slot, const Tensor& x, Mode mode, bool keep) {
  slot.saved.assign(cell.layers.size(), Saved{});
  Tensor h = cell.layers[0]->Forward(x, slot.saved[0], mode);
  for (size_t i = 1; i < cell.layers.size(); ++i) h = cell.layers[i]->Forward(h, slot.saved[i], mode);
  // Recomputed later: keep the boundary input and what R does not re-run.
  if (!keep) {
    for (size_t i = 0; i < cell.rematerialized; ++i) slot.saved[i] = Saved{};
  }
  return h;
}

void Runner::Recompute(Cell& cell, Cell::Slot& slot) {
  if (cell.rematerialized == 0) return;
  Tensor h = cell.layers[0]->Forward(slot.input, slot.saved[0], Mode::kRecompute);
  for (size_t i = 1; i < cell.rematerialized; ++i) h = cell.layers[i]->Forward(h, slot.saved[i], Mode::kRecompute);
}

Result<void> Runner::RunOp(int device, const Op& op, int step) {
  const int M = s_.num_micro_batches;
  const auto mb_size = static_cast<int>(c_.training.MicroBatchSize());
  MemoryAccount* account = &accounts_[device];
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
  auto fail_comm = [&](Transport::Status status, const char* verb) -> Result<void> {
    if (status == Transport::Status::kAborted) return FailRuntime("aborted");
    return FailRuntime(fmt::format("{} timed out after {} s waiting to {} device {}", Where(op, device), o_.timeout_s,
                                   verb, op.peer));
  };
  const bool last_stage = op.stage == s_.num_stages - 1;
  switch (op.kind) {
    case OpKind::kForward: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      if (op.stage == 0) {
        const int cols = task_.input_cols();
        slot.input = Tensor(account, mb_size, cols);
        std::copy_n(&batch_.inputs[static_cast<size_t>(op.micro_batch) * mb_size * cols],
                    static_cast<size_t>(mb_size) * cols, slot.input.data());
      } else if (s_.placement[op.stage - 1] == device) {
        slot.input = std::move(cells_[op.stage - 1].slots[op.micro_batch].output);
      }
      if (slot.input.empty()) return FailRuntime(fmt::format("{}: its input never arrived", Where(op, device)));
      const bool keep = !recomputed_[static_cast<size_t>(op.stage) * M + op.micro_batch];
      Tensor y = Forward(cell, slot, slot.input, Mode::kTrain, keep);
      if (last_stage) {
        const ptrdiff_t per = task_.labels_per_sample();  // the loss is the mean over every label of the mini-batch
        std::vector<int> labels(batch_.labels.begin() + op.micro_batch * mb_size * per,
                                batch_.labels.begin() + (op.micro_batch + 1) * mb_size * per);
        double loss = 0;
        slot.grad_output = SoftmaxCrossEntropy(y, labels, static_cast<double>(c_.training.batch * per), loss);
        if (!std::isfinite(loss)) {
          return FailRuntime(fmt::format("step {}: {}: the loss of micro-batch {} is {} (stage {})", step + 1,
                                         Where(op, device), op.micro_batch, loss, op.stage));
        }
        loss_sum_[device] += loss;
      } else {
        slot.output = std::move(y);
      }
      return {};
    }
    case OpKind::kRecompute: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      if (slot.saved.size() != cell.layers.size()) {
        return FailRuntime(fmt::format("{}: its forward has not run", Where(op, device)));
      }
      Recompute(cell, slot);
      return {};
    }
    case OpKind::kBackward:
    case OpKind::kBackwardInput: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      if (!last_stage && s_.placement[op.stage + 1] == device) {
        slot.grad_output = std::move(cells_[op.stage + 1].slots[op.micro_batch].grad_input);
      }
      if (slot.grad_output.empty() || slot.saved.size() != cell.layers.size()) {
        return FailRuntime(fmt::format("{}: its output gradient or saved activations are missing", Where(op, device)));
      }
      // B does everything; I leaves the weight gradients in `saved` for W.
      const bool whole = op.kind == OpKind::kBackward;
      auto back = [&](size_t i, const Tensor& dy) {
        return whole ? cell.layers[i]->Backward(dy, slot.saved[i]) : cell.layers[i]->BackwardInput(dy, slot.saved[i]);
      };
      Tensor g = back(cell.layers.size() - 1, slot.grad_output);
      for (size_t i = cell.layers.size() - 1; i-- > 0;) g = back(i, g);
      if (whole) slot.saved.clear();
      slot.input.Release();
      slot.grad_output.Release();
      if (op.stage > 0) slot.grad_input = std::move(g);
      return {};
    }
    case OpKind::kBackwardWeight: {
      Cell& cell = cells_[op.stage];
      Cell::Slot& slot = cell.slots[op.micro_batch];
      if (slot.saved.size() != cell.layers.size()) {
        return FailRuntime(fmt::format("{}: its input-gradient pass (I) has not run", Where(op, device)));
      }
      for (size_t i = 0; i < cell.layers.size(); ++i) cell.layers[i]->BackwardWeight(slot.saved[i]);
      slot.saved.clear();
      return {};
    }
    case OpKind::kSendF:
    case OpKind::kSendB: {
      Cell::Slot& slot = cells_[op.stage].slots[op.micro_batch];
      Tensor& t = op.kind == OpKind::kSendF ? slot.output : slot.grad_input;
      Message m{op.kind, op.stage, op.micro_batch, t.rows(), t.cols(),
                std::vector<float>(t.data(), t.data() + static_cast<size_t>(t.rows()) * t.cols())};
      t.Release();
      if (auto st = transport_->Send(device, op.peer, std::move(m), deadline); st != Transport::Status::kOk) {
        return fail_comm(st, "send to");
      }
      return {};
    }
    case OpKind::kRecvF:
    case OpKind::kRecvB: {
      Message m;
      if (auto st = transport_->Recv(op.peer, device, m, deadline); st != Transport::Status::kOk) {
        return fail_comm(st, "receive from");
      }
      const bool forward = op.kind == OpKind::kRecvF;
      const int32_t expected_stage = forward ? op.stage - 1 : op.stage + 1;
      if (m.kind != (forward ? OpKind::kSendF : OpKind::kSendB) || m.stage != expected_stage ||
          m.micro_batch != op.micro_batch) {
        return FailRuntime(fmt::format("{} received {} instead", Where(op, device),
                                       ir::OpToken(Op{.kind = m.kind, .stage = m.stage, .micro_batch = m.micro_batch})));
      }
      Tensor t(account, m.rows, m.cols);
      std::copy(m.data.begin(), m.data.end(), t.data());
      Cell::Slot& slot = cells_[op.stage].slots[op.micro_batch];
      (forward ? slot.input : slot.grad_output) = std::move(t);
      return {};
    }
    case OpKind::kStep: {
      Optimizer opt = optimizer_;
      opt.step = step + 1;
      for (Cell& cell : cells_) {
        if (s_.placement[cell.stage] != device) continue;
        for (auto& layer : cell.layers) {
          for (Param* p : layer->Params()) opt.Apply(*p);
          layer->EndStep();
        }
      }
      return {};
    }
    default:
      return Fail(fmt::format("{}: the CPU backend does not run {} ops yet", Where(op, device), ir::OpKindName(op.kind)));
  }
}

Result<void> Runner::Worker(int device, int step, Clock::time_point origin) {
  accounts_[device].Reset(origin);
  for (const Op& op : s_.programs[device]) {
    if (failed_) return FailRuntime("aborted");
    const double start = std::chrono::duration<double>(Clock::now() - origin).count();
    Result<void> ok;
    try {  // a layer or the transport that throws stops the run like any failure
      if (op.id == o_.fail_op) throw std::runtime_error("injected fault");
      ok = RunOp(device, op, step);
    } catch (const std::exception& e) {
      ok = FailRuntime(fmt::format("{} failed: {}", Where(op, device), e.what()));
    }
    const double end = std::chrono::duration<double>(Clock::now() - origin).count();
    if (!ok) return ok;
    events_[op.id] = traces::Event{op.id, device, StreamOf(op.kind), op.kind, op.stage, op.micro_batch, op.peer, start, end, op.bytes};
  }
  return {};
}

void Runner::GatherStep(ExecuteResult& r) {
  static_cast<MpiTransport*>(transport_.get())->Flush();
  GatherStepAcrossRanks(s_, rank_, accounts_[rank_].peak_bytes(), loss_sum_, r.step_time_s.back(), r.peak_memory_bytes,
                        events_);
}

Result<ExecuteResult> Runner::Run() {
  if (auto ok = CheckSinglePipeline(c_, s_, "CPU"); !ok) return tl::unexpected(ok.error());
  UseOneBlasThread();
  KeepFreedMemory();
  for (Cell& cell : cells_) {
    cell.slots.assign(s_.num_micro_batches, Cell::Slot{});
    // Parameters with their fp64 gradients, optimizer state and gradient
    // scratch live all along: 4 + 8 + 8 (Adam) + 4 bytes per weight.
    const int64_t state = c_.training.optimizer == "adam" ? 2 : 1;
    for (auto& layer : cell.layers) {
      for (Param* p : layer->Params()) {
        accounts_[s_.placement[cell.stage]].Add(static_cast<int64_t>(p->value.size()) * (4 + 8 + 4 * state) +
                                                static_cast<int64_t>(p->scratch.size()) * 4);
      }
    }
  }
  ExecuteResult result;
  const int D = s_.num_devices;
  // Every step's events and memory samples; the trace is of the median step.
  std::vector<std::vector<traces::Event>> step_events;
  std::vector<std::vector<std::vector<traces::MemorySample>>> step_memory;
  result.peak_memory_bytes.assign(D, 0);
  events_.assign(s_.NumOps(), traces::Event{});
  // Persistent workers, one per device, pinned once. Each step they start
  // together at a barrier whose completion stamps the step's origin, and
  // meet again at its end: thread start-up and scheduling are not part of
  // the step, as they are not in a long-running training job.
  const int parties = (o_.mpi ? 1 : D) + 1;
  std::barrier start(parties, [this]() noexcept { origin_ = Clock::now(); });
  std::barrier end(parties);
  bool stop = false;
  int current_step = 0;
  std::vector<std::thread> workers;
  for (int d = 0; d < D; ++d) {
    if (o_.mpi && d != rank_) continue;
    workers.emplace_back([this, d, &start, &end, &stop, &current_step] {
      PinToCore(d);
      for (;;) {
        start.arrive_and_wait();
        if (stop) return;
        auto ok = Worker(d, current_step, origin_);
        if (!ok && ok.error().message != "aborted") {
          std::lock_guard lock(error_mu_);
          if (error_.empty()) {
            error_ = ok.error().message;
            error_kind_ = ok.error().kind;
          }
          failed_ = true;
          transport_->Abort();
        }
        end.arrive_and_wait();
      }
    });
  }
  ScopeExit release{[&] {  // on every way out of Run: let the workers go and join them
    stop = true;
    start.arrive_and_wait();
    for (auto& t : workers) t.join();
  }};
  for (int step = 0; step < o_.steps; ++step) {
    batch_ = task_.Make(step);
    loss_sum_.assign(D, 0.0);
    current_step = step;
    if (o_.mpi) Barrier();  // every rank's step starts together
    start.arrive_and_wait();
    end.arrive_and_wait();
    if (failed_) return tl::unexpected(Error{error_, error_kind_});
    result.step_time_s.push_back(std::chrono::duration<double>(Clock::now() - origin_).count());
    if (o_.mpi) GatherStep(result);
    double loss = 0;
    for (double l : loss_sum_) loss += l;
    result.losses.push_back(loss / static_cast<double>(c_.training.batch * task_.labels_per_sample()));
    for (int d = 0; d < D; ++d) {
      if (o_.mpi && d != rank_) continue;  // another rank's device: GatherStep has its peak
      result.peak_memory_bytes[d] = std::max(result.peak_memory_bytes[d], static_cast<double>(accounts_[d].peak_bytes()));
    }
    step_events.push_back(events_);
    auto& memory = step_memory.emplace_back();
    for (int d = 0; d < D; ++d) {
      auto& samples = memory.emplace_back();
      if (o_.mpi && d != rank_) continue;
      for (const auto& [time, bytes] : accounts_[d].samples()) samples.push_back({time, bytes});
    }
    if (!std::isfinite(result.losses.back())) {
      return FailRuntime(fmt::format("step {}: the loss is {} (stage {})", step, result.losses.back(), s_.num_stages - 1));
    }
  }
  for (Cell& cell : cells_) {
    const bool mine = !o_.mpi || s_.placement[cell.stage] == rank_;
    for (auto& layer : cell.layers) {
      for (Param* p : layer->Params()) {
        for (float v : p->value) result.parameters.push_back(mine ? v : 0.f);
      }
    }
  }
  if (o_.mpi) SumAcrossRanks(result.parameters);  // each stage's from the rank that trained it
  double sq = 0;
  for (float v : result.parameters) sq += static_cast<double>(v) * v;
  result.param_norm = std::sqrt(sq);
  result.trace = MedianStepTrace("execute:cpu", s_, result.step_time_s, step_events, step_memory);
  return result;
}

}  // namespace

Result<void> CheckSinglePipeline(const cost::Config& c, const ir::Schedule& s, std::string_view backend) {
  if (s.replicas > 1) {
    return Fail(fmt::format("{}: the {} backend runs one pipeline; {} data-parallel replicas are not supported yet",
                            c.source, backend, s.replicas));
  }
  for (const auto& p : s.programs) {
    for (const Op& op : p) {
      if (op.kind == OpKind::kAllReduce) {
        return Fail(fmt::format("device {}: {}: the {} backend does not run {} ops yet", op.device, ir::OpToken(op),
                                backend, ir::OpKindName(op.kind)));
      }
    }
  }
  return {};
}

traces::Stream StreamOf(OpKind kind) {
  return ir::IsSend(kind) ? traces::Stream::kSend
         : ir::IsRecv(kind) ? traces::Stream::kRecv
         : kind == OpKind::kAllReduce ? traces::Stream::kAllReduce
                                      : traces::Stream::kCompute;
}

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
  traces::Trace t;
  t.source = std::move(source);
  t.stages = s.num_stages;
  t.micro_batches = s.num_micro_batches;
  t.devices = s.num_devices;
  t.replicas = s.replicas;
  t.placement = s.placement;
  const size_t median = MedianStep(step_time_s);
  t.events = std::move(step_events[median]);
  t.memory = std::move(step_memory[median]);
  return t;
}

void GatherStepAcrossRanks(const ir::Schedule& s, int rank, int64_t own_peak_bytes, std::vector<double>& loss_sum,
                           double& step_time_s, std::vector<double>& peaks, std::vector<traces::Event>& events) {
  SumAcrossRanks(loss_sum);
  std::vector<double> slowest{step_time_s};
  MaxAcrossRanks(slowest);
  step_time_s = slowest[0];
  std::vector<double> step_peaks(s.num_devices, 0.0);
  step_peaks[rank] = static_cast<double>(own_peak_bytes);
  SumAcrossRanks(step_peaks);
  for (int d = 0; d < s.num_devices; ++d) peaks[d] = std::max(peaks[d], step_peaks[d]);
  std::vector<double> times(2 * static_cast<size_t>(s.NumOps()), 0.0);
  for (const Op& op : s.programs[rank]) {
    times[2 * static_cast<size_t>(op.id)] = events[op.id].start_s;
    times[2 * static_cast<size_t>(op.id) + 1] = events[op.id].end_s;
  }
  SumAcrossRanks(times);
  for (int d = 0; d < s.num_devices; ++d) {
    for (const Op& op : s.programs[d]) {
      events[op.id] = traces::Event{op.id, d, StreamOf(op.kind), op.kind, op.stage, op.micro_batch, op.peer,
                                    times[2 * static_cast<size_t>(op.id)], times[2 * static_cast<size_t>(op.id) + 1],
                                    op.bytes};
    }
  }
}

Result<ExecuteResult> ExecuteCpu(const cost::Config& config, const partition::Plan& plan, const ExecuteOptions& options) {
  if (auto ok = CheckExecutable(config); !ok) return tl::unexpected(ok.error());
  Runner runner(config, plan, options);
  return runner.Run();
}

}  // namespace twinpipe::execute
