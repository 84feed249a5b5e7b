// The schedule walker both backends share: one persistent worker thread per
// device of every replica, each walking its device's program in order (the
// stage-0 input, same-device hand-offs, keep or recompute, the loss, B, I, W,
// sends and checked receives, all-reduces and STEP), one error latch, one
// step loop and one result. A backend is the narrow table of what differs:
// tensors, layers and the calls on them, payloads, the all-reduce, the
// optimizer, and hooks around ops and steps.
//
//   CpuBackend backend(...);
//   Walker<CpuBackend> walker(backend, config, plan, options, "execute:cpu");
//   Result<ExecuteResult> r = walker.Run();
//
// Replicas: with R data-parallel replicas, replica r's pipeline device d is
// worker (cluster device) r * D + d; it runs program d with its own copy of
// the model on rows [r * batch, (r + 1) * batch) of the step's global batch
// of R * batch samples. ALLREDUCE ops average a stage's gradients over its
// replicas; the backend may run them beside the compute, and STEP waits.
//
// The table B provides (w: the worker, i: the op's position in its program):
//   types Tensor, Layer, Saved, Param
//   Result<void> Setup(local workers)    after MPI is up, before the cells
//   Result<std::vector<std::unique_ptr<Layer>>> BuildCell(w, stage)
//   int64_t ParamBytes(w, Param&)        resident bytes of a parameter and its state
//   void BeginStep(w, step, batch, first_sample)   before the clock starts
//   void StartClock(w, origin)           after every worker is ready
//   void BeginOp(w, i, op)  void EndOp(w, i, op)
//   Tensor Input(w, micro_batch)         stage 0's rows
//   Tensor Forward(w, Layer&, x, Saved&, Mode)
//   Tensor Backward(w, Layer&, dy, const Saved&)
//   Tensor BackwardInput(w, Layer&, dy, Saved&)
//   void BackwardWeight(w, Layer&, Saved&)
//   Tensor Loss(w, y, micro_batch)       the output's gradient; adds the loss up
//   void Pack(w, op, Tensor&, Message&)  the payload of a send (may take the tensor)
//   Tensor Unpack(w, op, Message&)       a checked receive's tensor
//   void AllReduce(w, i, op, params)     average the stage's gradients over replicas
//   void Step(w, step, params, deadline) the optimizer (after this step's all-reduces)
//   void EndLayerStep(w, Layer&)         once per step (batchnorm folds its statistics)
//   void EndStep(w, deadline)            the device's work is done
//   void AfterStep(w, deadline)          every local worker's EndStep is done
//   std::pair<double, double> OpTime(w, i)   seconds from the origin
//   double StepLoss(w)                   the summed loss of the step
//   MemoryAccount& Account(w)
//   void AppendParams(w, Param&, std::vector<float>&)
//   void AppendState(w, Layer&, std::vector<double>&)   what is kept, not trained
//   void Abort()                         a failure: wake whatever waits
// Calls may throw; the walker names the op, unless it is an OpFailure, whose
// message already names one (an all-reduce's, reported at STEP).
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cost_models/config.h"
#include "cost_models/plan.h"
#include "execute/layers/layer.h"
#include "execute/model.h"
#include "execute/mpi.h"
#include "execute/runtime.h"
#include "execute/sync.h"
#include "execute/transport.h"
#include "ir/dependencies.h"
#include "traces/schedule_trace.h"

namespace twinpipe::execute {

struct Worker {
  int device = 0;   // pipeline device: the program it runs
  int replica = 0;
  int id = 0;       // cluster device: replica * D + device (the MPI rank)
};

struct OpFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown by a backend that stops because another device failed first.
struct Aborted : std::runtime_error {
  Aborted() : std::runtime_error("aborted") {}
};

// Non-template pieces of the walker (walker.cc).
namespace walk {
// Keeps a worker on core `id` (mod the cores there are). Advice only.
void PinToCore(int id);
std::string Where(const ir::Op& op, const Worker& w);
}  // namespace walk

template <typename B>
class Walker {
 public:
  using Tensor = typename B::Tensor;
  using Layer = typename B::Layer;
  using Saved = typename B::Saved;
  using Param = typename B::Param;
  using Clock = std::chrono::steady_clock;

  Walker(B& backend, const cost::Config& config, const cost::Plan& plan, const ExecuteOptions& options,
         std::string source)
      : b_(backend), c_(config), plan_(plan), s_(plan.schedule), o_(options), source_(std::move(source)),
        D_(s_.num_devices), R_(std::max(1, s_.replicas)), task_(GlobalConfig(config, R_)) {}

  // Bad input when the schedule cannot run here; runtime errors name the op.
  Result<ExecuteResult> Run();

  // Under MPI the world must be D x R ranks; rank r runs worker r.
  int workers() const { return D_ * R_; }

 private:
  struct Cell {
    std::vector<std::unique_ptr<Layer>> layers;
    size_t rematerialized = 0;  // R re-runs layers [0, this); the rest keep F's activations
    struct Slot {
      Tensor input;               // the boundary input, kept for R and B
      std::vector<Saved> saved;   // per layer, unless recomputed
      Tensor output;              // activation for the next stage
      Tensor grad_output;         // gradient of the output (the loss's or the next stage's)
      Tensor grad_input;          // gradient for the previous stage
    };
    std::vector<Slot> slots;      // per micro-batch
    std::vector<Param*> params;
  };

  static cost::Config GlobalConfig(cost::Config c, int replicas) {
    c.training.batch *= replicas;  // the task draws the global batch; replica r takes its rows
    return c;
  }
  bool Local(int id) const { return !o_.mpi || id == rank_; }
  Result<void> Setup();
  Result<void> RunStep(const Worker& w, int step);
  Result<void> RunOp(const Worker& w, size_t i, const ir::Op& op, int step, Clock::time_point deadline);
  void Latch(const Error& e);
  Result<void> CommFailure(Transport::Status status, const ir::Op& op, const Worker& w, const char* verb) const {
    if (status == Transport::Status::kAborted) return FailAborted();
    return FailRuntime(fmt::format("{} timed out after {} s waiting to {} device {}", walk::Where(op, w), o_.timeout_s,
                                   verb, w.replica * D_ + op.peer));
  }
  Clock::time_point Deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
  }

  B& b_;
  const cost::Config& c_;
  const cost::Plan& plan_;
  const ir::Schedule& s_;
  ExecuteOptions o_;
  std::string source_;
  int D_, R_;
  SyntheticTask task_;
  SyntheticTask::Batch batch_;
  int rank_ = -1;
  std::vector<Worker> local_;               // the workers this process runs
  std::vector<std::vector<Cell>> cells_;    // [replica][stage], local workers' only
  // What the schedule implies (ir/dependencies.h): which pairs an R op
  // rebuilds, and which inputs come by receive rather than from this device.
  std::optional<ir::Dependencies> deps_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<StepBarrier> clock_, after_;
  Clock::time_point origin_;
  std::vector<Clock::time_point> end_;      // per local worker: its work done
  std::vector<traces::Event> events_;       // replica 0's, by op id
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::optional<Error> error_;
};

template <typename B>
void Walker<B>::Latch(const Error& e) {
  {
    std::lock_guard lock(error_mu_);
    if (!error_ && e.kind != ErrorKind::kAborted) error_ = e;
  }
  if (failed_.exchange(true)) return;
  transport_->Abort();
  clock_->Abort();
  after_->Abort();
  b_.Abort();
}

template <typename B>
Result<void> Walker<B>::Setup() {
  const int workers = D_ * R_;
  if (o_.mpi) {
    auto world = InitMpi();
    if (!world) return tl::unexpected(world.error());
    rank_ = world->rank;
    if (world->size != workers) {
      return Fail(fmt::format("{} ranks, but the schedule runs on {} devices x {} replicas: start one rank per device "
                              "(mpirun -np {})", world->size, D_, R_, workers));
    }
    transport_ = std::make_unique<MpiTransport>();
  } else {
    const bool core_each = workers <= static_cast<int>(std::thread::hardware_concurrency());
    transport_ = std::make_unique<InProcTransport>(workers, 2 * static_cast<size_t>(s_.num_micro_batches) + 2,
                                                   std::chrono::microseconds(core_each ? 500 : 0));
  }
  for (int id = 0; id < workers; ++id) {
    if (Local(id)) local_.push_back(Worker{id % D_, id / D_, id});
  }
  if (auto ok = b_.Setup(local_); !ok) return ok;
  clock_ = std::make_unique<StepBarrier>(static_cast<int>(local_.size()), [this] { origin_ = Clock::now(); });
  after_ = std::make_unique<StepBarrier>(static_cast<int>(local_.size()));
  end_.assign(local_.size(), Clock::time_point{});

  deps_.emplace(s_);
  cells_.resize(R_);
  for (const Worker& w : local_) {
    auto& cells = cells_[w.replica];
    cells.resize(s_.num_stages);
    for (int st = 0; st < s_.num_stages; ++st) {
      if (s_.placement[st] != w.device) continue;
      const auto& range = plan_.partition.cells[st];
      Cell& cell = cells[st];
      auto layers = b_.BuildCell(w, st);
      if (!layers) return tl::unexpected(layers.error());
      cell.layers = std::move(*layers);
      if (cell.layers.empty()) return Fail(fmt::format("stage {} has no layers", st));
      cell.rematerialized =
          static_cast<size_t>(cost::RematerializedEnd(c_.model, range.first_layer, range.last_layer) - range.first_layer);
      cell.slots.assign(s_.num_micro_batches, typename Cell::Slot{});
      for (auto& layer : cell.layers) {
        for (Param* p : layer->Params()) {
          cell.params.push_back(p);
          b_.Account(w).Add(b_.ParamBytes(w, *p));  // parameters and their state live all along
        }
      }
    }
  }
  events_ = traces::TraceFor(s_, source_).events;  // each step fills in the times
  return {};
}

template <typename B>
Result<void> Walker<B>::RunOp(const Worker& w, size_t i, const ir::Op& op, int step, Clock::time_point deadline) {
  using ir::OpKind;
  std::vector<Cell>& cells = cells_[w.replica];
  const bool last_stage = op.stage == s_.num_stages - 1;
  auto where = [&] { return walk::Where(op, w); };
  switch (op.kind) {
    case OpKind::kForward: {
      Cell& cell = cells[op.stage];
      auto& slot = cell.slots[op.micro_batch];
      if (op.stage == 0) {
        slot.input = b_.Input(w, op.micro_batch);
      } else if (deps_->InputRecv(op) < 0) {  // the previous stage is on this device
        slot.input = std::move(cells[op.stage - 1].slots[op.micro_batch].output);
      }
      if (slot.input.empty()) return FailRuntime(fmt::format("{}: its input never arrived", where()));
      slot.saved.assign(cell.layers.size(), Saved{});
      Tensor h = b_.Forward(w, *cell.layers[0], slot.input, slot.saved[0], Mode::kTrain);
      for (size_t l = 1; l < cell.layers.size(); ++l) h = b_.Forward(w, *cell.layers[l], h, slot.saved[l], Mode::kTrain);
      // Recomputed later: keep the boundary input and what R does not re-run.
      if (deps_->Recomputed(op.stage, op.micro_batch)) {
        for (size_t l = 0; l < cell.rematerialized; ++l) slot.saved[l] = Saved{};
      }
      if (last_stage) {
        slot.grad_output = b_.Loss(w, h, op.micro_batch);
      } else {
        slot.output = std::move(h);
      }
      return {};
    }
    case OpKind::kRecompute: {
      Cell& cell = cells[op.stage];
      auto& slot = cell.slots[op.micro_batch];
      if (slot.saved.size() != cell.layers.size() || slot.input.empty()) {
        return FailRuntime(fmt::format("{}: its forward has not run", where()));
      }
      if (cell.rematerialized == 0) return {};
      slot.saved[0] = Saved{};
      Tensor h = b_.Forward(w, *cell.layers[0], slot.input, slot.saved[0], Mode::kRecompute);
      for (size_t l = 1; l < cell.rematerialized; ++l) {
        slot.saved[l] = Saved{};
        h = b_.Forward(w, *cell.layers[l], h, slot.saved[l], Mode::kRecompute);
      }
      return {};
    }
    case OpKind::kBackward:
    case OpKind::kBackwardInput: {
      Cell& cell = cells[op.stage];
      auto& slot = cell.slots[op.micro_batch];
      if (!last_stage && deps_->InputRecv(op) < 0) {  // the next stage is on this device
        slot.grad_output = std::move(cells[op.stage + 1].slots[op.micro_batch].grad_input);
      }
      if (slot.grad_output.empty() || slot.saved.size() != cell.layers.size()) {
        return FailRuntime(fmt::format("{}: its output gradient or saved activations are missing", where()));
      }
      // B does everything; I leaves the weight gradients' inputs in `saved` for W.
      const bool whole = op.kind == OpKind::kBackward;
      auto back = [&](size_t l, const Tensor& dy) {
        return whole ? b_.Backward(w, *cell.layers[l], dy, slot.saved[l])
                     : b_.BackwardInput(w, *cell.layers[l], dy, slot.saved[l]);
      };
      Tensor g = back(cell.layers.size() - 1, slot.grad_output);
      for (size_t l = cell.layers.size() - 1; l-- > 0;) g = back(l, g);
      if (whole) slot.saved.clear();
      slot.input.Release();
      slot.grad_output.Release();
      if (op.stage > 0) slot.grad_input = std::move(g);
      return {};
    }
    case OpKind::kBackwardWeight: {
      Cell& cell = cells[op.stage];
      auto& slot = cell.slots[op.micro_batch];
      if (slot.saved.size() != cell.layers.size()) {
        return FailRuntime(fmt::format("{}: its input-gradient pass (I) has not run", where()));
      }
      for (size_t l = 0; l < cell.layers.size(); ++l) b_.BackwardWeight(w, *cell.layers[l], slot.saved[l]);
      slot.saved.clear();
      return {};
    }
    case OpKind::kSendF:
    case OpKind::kSendB: {
      auto& slot = cells[op.stage].slots[op.micro_batch];
      Tensor& t = op.kind == OpKind::kSendF ? slot.output : slot.grad_input;
      if (t.empty()) return FailRuntime(fmt::format("{}: nothing to send (its producer has not run)", where()));
      Message m{op.kind, op.stage, op.micro_batch, t.rows(), t.cols(), {}, nullptr};
      b_.Pack(w, op, t, m);
      t.Release();
      const auto status = transport_->Send(w.id, w.replica * D_ + op.peer, std::move(m), deadline);
      if (status != Transport::Status::kOk) return CommFailure(status, op, w, "send to");
      return {};
    }
    case OpKind::kRecvF:
    case OpKind::kRecvB: {
      Message m;
      const auto status = transport_->Recv(w.replica * D_ + op.peer, w.id, m, deadline);
      if (status != Transport::Status::kOk) return CommFailure(status, op, w, "receive from");
      const bool forward = op.kind == OpKind::kRecvF;
      const int32_t expected_stage = forward ? op.stage - 1 : op.stage + 1;
      if (m.kind != (forward ? OpKind::kSendF : OpKind::kSendB) || m.stage != expected_stage ||
          m.micro_batch != op.micro_batch) {
        return FailRuntime(fmt::format("{} received {} instead", where(),
                                       ir::OpToken(ir::Op{.kind = m.kind, .stage = m.stage, .micro_batch = m.micro_batch})));
      }
      auto& slot = cells[op.stage].slots[op.micro_batch];
      (forward ? slot.input : slot.grad_output) = b_.Unpack(w, op, m);
      return {};
    }
    case OpKind::kAllReduce:
      b_.AllReduce(w, i, op, cells[op.stage].params);
      return {};
    case OpKind::kStep: {
      std::vector<Param*> params;
      for (int st = 0; st < s_.num_stages; ++st) {
        if (s_.placement[st] == w.device) params.insert(params.end(), cells[st].params.begin(), cells[st].params.end());
      }
      b_.Step(w, step, params, deadline);
      for (int st = 0; st < s_.num_stages; ++st) {
        if (s_.placement[st] != w.device) continue;
        for (auto& layer : cells[st].layers) b_.EndLayerStep(w, *layer);
      }
      return {};
    }
  }
  return Fail(fmt::format("{}: unknown op kind", where()));
}

template <typename B>
Result<void> Walker<B>::RunStep(const Worker& w, int step) {
  const ir::Op* current = nullptr;
  size_t local = 0;
  while (local_[local].id != w.id) ++local;
  try {
    b_.BeginStep(w, step, batch_, static_cast<int64_t>(w.replica) * c_.training.batch);
    if (auto st = clock_->Arrive(Deadline()); st != SyncStatus::kOk) {
      return st == SyncStatus::kAborted ? FailAborted()
                                        : FailRuntime(fmt::format("device {}: timed out waiting for the other devices "
                                                                  "to start the step", w.id));
    }
    b_.StartClock(w, origin_);
    const auto& program = s_.programs[w.device];
    for (size_t i = 0; i < program.size(); ++i) {
      const ir::Op& op = program[i];
      current = &op;
      if (failed_) return FailAborted();
      if (op.id == o_.fail_op && w.replica == 0) throw std::runtime_error("injected fault");
      b_.BeginOp(w, i, op);
      if (auto ok = RunOp(w, i, op, step, Deadline()); !ok) return ok;
      b_.EndOp(w, i, op);
    }
    current = nullptr;
    b_.EndStep(w, Deadline());
    end_[local] = Clock::now();
    // Every receiver has taken what this device lent it once all are here.
    if (auto st = after_->Arrive(Deadline()); st != SyncStatus::kOk) {
      return st == SyncStatus::kAborted ? FailAborted()
                                        : FailRuntime(fmt::format("device {}: timed out waiting for the other devices "
                                                                  "to end the step", w.id));
    }
    b_.AfterStep(w, Deadline());
    if (w.replica == 0) {
      for (size_t i = 0; i < program.size(); ++i) {
        const ir::Op& op = program[i];
        const auto [start, end] = b_.OpTime(w, i);
        events_[op.id].start_s = start;
        events_[op.id].end_s = end;
      }
    }
  } catch (const OpFailure& e) {
    return FailRuntime(e.what());
  } catch (const Aborted&) {
    return FailAborted();
  } catch (const std::exception& e) {  // a layer, the transport, CUDA: any failure stops the run
    const std::string what = e.what();
    return FailRuntime(current ? fmt::format("{} failed: {}", walk::Where(*current, w), what)
                               : fmt::format("device {}: {}", w.id, what));
  }
  return {};
}

template <typename B>
Result<ExecuteResult> Walker<B>::Run() {
  if (auto ok = Setup(); !ok) return tl::unexpected(ok.error());
  const int workers = D_ * R_;
  ExecuteResult result;
  result.peak_memory_bytes.assign(workers, 0);
  std::vector<std::vector<traces::Event>> step_events;
  std::vector<std::vector<std::vector<traces::MemorySample>>> step_memory;
  // Persistent workers, one per device of every local replica, pinned once.
  // Each step they start together at a barrier, and meet again at its end:
  // thread start-up and scheduling are not part of the step, as they are not
  // in a long-running training job.
  const auto parties = static_cast<ptrdiff_t>(local_.size()) + 1;
  std::barrier start(parties), end(parties);
  std::atomic<bool> stop{false};
  std::atomic<int> current_step{0};
  std::vector<std::thread> threads;
  for (const Worker& w : local_) {
    threads.emplace_back([this, w, &start, &end, &stop, &current_step] {
      walk::PinToCore(w.id);
      for (;;) {
        start.arrive_and_wait();
        if (stop) return;
        if (auto ok = RunStep(w, current_step); !ok) {
          if (o_.on_worker_error) o_.on_worker_error(w.id, ok.error());
          Latch(ok.error());
        }
        end.arrive_and_wait();
      }
    });
  }
  struct Join {  // on every way out of Run: let the workers go and join them
    std::function<void()> f;
    ~Join() { f(); }
  } join{[&] {
    stop = true;
    start.arrive_and_wait();
    for (auto& t : threads) t.join();
  }};
  const double labels = static_cast<double>(c_.training.batch) * R_ * task_.labels_per_sample();
  for (int step = 0; step < o_.steps; ++step) {
    batch_ = task_.Make(step);
    current_step = step;
    if (o_.mpi) Barrier();  // every rank's step starts together
    start.arrive_and_wait();
    end.arrive_and_wait();
    if (failed_) {
      std::lock_guard lock(error_mu_);
      return tl::unexpected(error_.value_or(Error{"aborted", ErrorKind::kRuntime}));  // nothing failed first
    }
    Clock::time_point last = origin_;
    for (const auto& e : end_) last = std::max(last, e);
    result.step_time_s.push_back(std::chrono::duration<double>(last - origin_).count());
    std::vector<double> loss_sum(workers, 0.0), peaks(workers, 0.0);
    for (const Worker& w : local_) {
      loss_sum[w.id] = b_.StepLoss(w);
      peaks[w.id] = static_cast<double>(b_.Account(w).peak_bytes());
    }
    if (o_.mpi) {
      static_cast<MpiTransport*>(transport_.get())->Flush();
      GatherStepAcrossRanks(s_, rank_, loss_sum, result.step_time_s.back(), peaks, events_);
    }
    double loss = 0;
    for (double l : loss_sum) loss += l;
    result.losses.push_back(loss / labels);
    if (!std::isfinite(result.losses.back())) {
      // The steps before it show how it diverged (the last five).
      const size_t before = result.losses.size() - 1, from = before > 5 ? before - 5 : 0;
      std::vector<std::string> earlier;
      for (size_t i = from; i < before; ++i) earlier.push_back(fmt::format("step {} {:.6g}", i + 1, result.losses[i]));
      return FailRuntime(fmt::format("step {}: the loss is {} (stage {}){}", step + 1, result.losses.back(),
                                     s_.num_stages - 1,
                                     earlier.empty() ? "" : fmt::format("; before it: {}", fmt::join(earlier, ", "))));
    }
    for (int id = 0; id < workers; ++id) result.peak_memory_bytes[id] = std::max(result.peak_memory_bytes[id], peaks[id]);
    if (o_.on_step) o_.on_step(step + 1, result.losses.back(), result.step_time_s.back());
    step_events.push_back(events_);
    auto& memory = step_memory.emplace_back(D_);
    for (const Worker& w : local_) {
      if (w.replica != 0) continue;
      for (const auto& [time, bytes] : b_.Account(w).samples()) memory[w.device].push_back({time, bytes});
    }
  }
  // Replica 0's parameters and running statistics, layer by layer (the
  // replicas hold the same).
  for (int st = 0; st < s_.num_stages; ++st) {
    const int id = s_.placement[st];
    if (Local(id)) {
      const Worker w{id, 0, id};
      for (Param* p : cells_[0][st].params) b_.AppendParams(w, *p, result.parameters);
      for (const auto& layer : cells_[0][st].layers) b_.AppendState(w, *layer, result.state);
    } else {  // another rank's stage: zeros here, its values from that rank below
      const auto& range = plan_.partition.cells[st];
      for (auto& layer : BuildLayers(c_, range.first_layer, range.last_layer)) {
        for (execute::Param* p : layer->Params()) result.parameters.insert(result.parameters.end(), p->value.size(), 0.f);
        std::vector<double> state;
        layer->AppendState(state);
        result.state.insert(result.state.end(), state.size(), 0.0);
      }
    }
  }
  if (o_.mpi) {
    SumAcrossRanks(result.parameters);
    SumAcrossRanks(result.state);
  }
  double sq = 0;
  for (float v : result.parameters) sq += static_cast<double>(v) * v;
  result.param_norm = std::sqrt(sq);
  result.trace = MedianStepTrace(source_, s_, result.step_time_s, step_events, step_memory);
  return result;
}

}  // namespace twinpipe::execute
