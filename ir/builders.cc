#include "ir/builders.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace twinpipe::ir {
namespace {

// An empty schedule of K stages on K devices, stage s on device s.
Schedule OneStagePerDevice(int32_t stages, int32_t micro_batches) {
  Schedule s;
  s.num_stages = stages;
  s.num_micro_batches = micro_batches;
  s.num_devices = stages;
  s.placement.resize(stages);
  s.programs.resize(stages);
  for (int32_t i = 0; i < stages; ++i) s.placement[i] = i;
  return s;
}

Op Compute(OpKind kind, int32_t stage, int32_t micro_batch) {
  return Op{.kind = kind, .device = stage, .stage = stage, .micro_batch = micro_batch};
}

void Finish(Schedule& s) {
  for (int32_t d = 0; d < s.num_devices; ++d) {
    s.programs[d].push_back(Op{.kind = OpKind::kStep, .device = d});
  }
  Renumber(s);
}

// 1F1B and ZB-H1 share their order: stage s runs min(K-s-1, M) warm-up
// forwards, then alternates a forward and a backward, then drains the
// backwards. With `split` each backward is an I, and a W follows it once the
// stage has deferred s of them; the deferred W's come last.
Schedule OneForwardOneBackward(int32_t stages, int32_t micro_batches, bool split) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  const OpKind backward = split ? OpKind::kBackwardInput : OpKind::kBackward;
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve((split ? 3 : 2) * static_cast<size_t>(micro_batches) + 1);
    const int32_t warmup = std::min(stages - st - 1, micro_batches);
    int32_t next_forward = 0, next_backward = 0, next_weight = 0;
    auto add_backward = [&](bool weight_now) {
      program.push_back(Compute(backward, st, next_backward++));
      if (split && weight_now) program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
    };
    for (; next_forward < warmup; ++next_forward) program.push_back(Compute(OpKind::kForward, st, next_forward));
    for (int32_t j = 0; next_forward < micro_batches; ++j) {
      program.push_back(Compute(OpKind::kForward, st, next_forward++));
      add_backward(j >= st);
    }
    while (next_backward < micro_batches) add_backward(true);
    while (split && next_weight < micro_batches) {
      program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
    }
  }
  Finish(s);
  return s;
}

}  // namespace

Schedule BuildNaive(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(2 * micro_batches + 1);
    for (int32_t m = 0; m < micro_batches; ++m) {
      program.push_back(Compute(OpKind::kForward, st, m));
      program.push_back(Compute(OpKind::kBackward, st, m));
    }
  }
  Finish(s);
  return s;
}

Schedule BuildGpipe(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(2 * micro_batches + 1);
    for (int32_t m = 0; m < micro_batches; ++m) program.push_back(Compute(OpKind::kForward, st, m));
    for (int32_t m = micro_batches - 1; m >= 0; --m) {
      program.push_back(Compute(OpKind::kBackward, st, m));
    }
  }
  Finish(s);
  return s;
}

Schedule Build1F1B(int32_t stages, int32_t micro_batches) { return OneForwardOneBackward(stages, micro_batches, false); }

namespace {

std::optional<ShapeProblem> InterleavedProblem(int32_t K, int32_t M, int32_t v) {
  if (v < 2) {
    return ShapeProblem{ShapeParameter::kChunks,
                        fmt::format("interleaved needs at least 2 chunks per device, got {} (with 1 it is 1f1b)", v)};
  }
  if (InterleavedGroup(K, M) == 0) {
    return ShapeProblem{ShapeParameter::kMicroBatches,
                        fmt::format("interleaved needs at least as many micro-batches as the {} devices "
                                    "(Megatron-Core's rule: they pass through the chunks in groups of K to M), "
                                    "got {}",
                                    K, M)};
  }
  return std::nullopt;
}

}  // namespace

int32_t InterleavedGroup(int32_t K, int32_t M) {
  if (K < 1 || M < K) return 0;
  for (int32_t n = K; n < M; ++n) {
    if (M % n == 0 || M % n >= K) return n;
  }
  return M;
}

Result<Schedule> BuildInterleaved(int32_t devices, int32_t micro_batches, int32_t chunks) {
  const int32_t K = devices, M = micro_batches, v = chunks;
  if (auto problem = InterleavedProblem(K, M, v)) return Fail(std::move(problem->message));
  Schedule s;
  s.num_stages = K * v;
  s.num_micro_batches = M;
  s.num_devices = K;
  s.placement.resize(s.num_stages);
  for (int32_t st = 0; st < s.num_stages; ++st) s.placement[st] = st % K;
  s.programs.resize(K);
  const int32_t total = M * v, N = InterleavedGroup(K, M);
  // Virtual micro-batch k: its micro-batch and forward chunk (Megatron-Core's
  // schedule table: each group of N micro-batches through chunk 0, then 1,
  // ...; the last group is what is left).
  std::vector<std::pair<int32_t, int32_t>> table;
  table.reserve(total);
  for (int32_t first = 0; first < M; first += N) {
    const int32_t last = std::min(first + N, M);
    for (int32_t c = 0; c < v; ++c) {
      for (int32_t m = first; m < last; ++m) table.emplace_back(m, c);
    }
  }
  auto micro_batch = [&](int32_t k) { return table[k].first; };
  auto chunk = [&](int32_t k, bool forward) { return forward ? table[k].second : v - 1 - table[k].second; };
  for (int32_t d = 0; d < K; ++d) {
    auto& program = s.programs[d];
    program.reserve(2 * static_cast<size_t>(total) + 1);
    auto add = [&](OpKind kind, int32_t k) {
      const int32_t stage = chunk(k, kind == OpKind::kForward) * K + d;
      program.push_back(Op{.kind = kind, .device = d, .stage = stage, .micro_batch = micro_batch(k)});
    };
    const int32_t warmup = std::min((K - d - 1) * 2 + (v - 1) * N, total);
    int32_t next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward) add(OpKind::kForward, next_forward);
    while (next_forward < total) {
      add(OpKind::kForward, next_forward++);
      add(OpKind::kBackward, next_backward++);
    }
    while (next_backward < total) add(OpKind::kBackward, next_backward++);
  }
  Finish(s);
  return s;
}

Schedule BuildZbH1(int32_t stages, int32_t micro_batches) { return OneForwardOneBackward(stages, micro_batches, true); }

Schedule BuildZbH2(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(3 * static_cast<size_t>(micro_batches) + 1);
    const int32_t warmup = std::min(2 * (stages - st) - 1, micro_batches), deferred = 2 * st;
    int32_t next_forward = 0, next_backward = 0, next_weight = 0;
    auto add_backward = [&] {
      program.push_back(Compute(OpKind::kBackwardInput, st, next_backward++));
      if (next_backward > deferred) program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
    };
    for (; next_forward < warmup; ++next_forward) program.push_back(Compute(OpKind::kForward, st, next_forward));
    while (next_forward < micro_batches) {
      add_backward();
      program.push_back(Compute(OpKind::kForward, st, next_forward++));
    }
    while (next_backward < micro_batches) add_backward();
    while (next_weight < micro_batches) program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
  }
  Finish(s);
  return s;
}

namespace {

// The rule of a schedule that places `kChunks` per device, whatever K and M.
template <int32_t kChunks>
std::optional<ShapeProblem> FixedChunks(const PipelineShape& shape) {
  if (shape.chunks == kChunks) return std::nullopt;
  return ShapeProblem{ShapeParameter::kChunks, fmt::format("schedule '{}' places {} chunk{} per device, not {}",
                                                           shape.schedule, kChunks, kChunks == 1 ? "" : "s",
                                                           shape.chunks)};
}

std::optional<ShapeProblem> InterleavedRule(const PipelineShape& shape) {
  return InterleavedProblem(shape.devices, shape.micro_batches, shape.chunks);
}

std::optional<ShapeProblem> DualPipeVRule(const PipelineShape& shape) {
  if (auto problem = FixedChunks<2>(shape)) return problem;
  if (auto ok = CheckDualPipeV(shape.devices, shape.micro_batches); !ok) {
    return ShapeProblem{ShapeParameter::kMicroBatches, std::move(ok.error().message)};
  }
  return std::nullopt;
}

// A builder of K and M alone as a table entry.
template <Schedule (*kBuild)(int32_t, int32_t)>
Result<Schedule> Unchunked(int32_t devices, int32_t micro_batches, int32_t) {
  return kBuild(devices, micro_batches);
}

Result<Schedule> DualPipeV(int32_t devices, int32_t micro_batches, int32_t) {
  return BuildDualPipeV(devices, micro_batches);
}

constexpr int32_t kOneChunk[] = {1};
constexpr int32_t kTwoChunks[] = {2};
constexpr int32_t kInterleavedChunks[] = {2, 4, 8};

constexpr ScheduleBuilder kBuilders[] = {
    {"naive", 1, kOneChunk, FixedChunks<1>, Unchunked<BuildNaive>},
    {"gpipe", 1, kOneChunk, FixedChunks<1>, Unchunked<BuildGpipe>},
    {"1f1b", 1, kOneChunk, FixedChunks<1>, Unchunked<Build1F1B>},
    {"interleaved", 2, kInterleavedChunks, InterleavedRule, BuildInterleaved},
    {"zb-h1", 1, kOneChunk, FixedChunks<1>, Unchunked<BuildZbH1>},
    {"zb-h2", 1, kOneChunk, FixedChunks<1>, Unchunked<BuildZbH2>},
    {"zb-v", 2, kTwoChunks, FixedChunks<2>, Unchunked<BuildZbV>},
    {"dualpipev", 2, kTwoChunks, DualPipeVRule, DualPipeV},
};

// The builder a schedule name plans its shape with: `auto`'s is zb-h1's.
const ScheduleBuilder* ShapeBuilder(std::string_view name) {
  return FindScheduleBuilder(name == kAutoSchedule ? "zb-h1" : name);
}

}  // namespace

std::span<const ScheduleBuilder> ScheduleBuilders() { return kBuilders; }

const ScheduleBuilder* FindScheduleBuilder(std::string_view name) {
  for (const ScheduleBuilder& b : kBuilders) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const std::vector<std::string>& BuilderNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const ScheduleBuilder& b : kBuilders) all.emplace_back(b.name);
    return all;
  }();
  return names;
}

const std::vector<std::string>& ScheduleNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = BuilderNames();
    all.emplace_back(kAutoSchedule);
    return all;
  }();
  return names;
}

Result<Schedule> BuildShape(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks) {
  // Checked as asked, so that a refusal names `auto` rather than zb-h1.
  if (auto ok = CheckShape(name, devices, micro_batches, chunks); !ok) return tl::unexpected(ok.error());
  return BuildByName(name == kAutoSchedule ? "zb-h1" : name, devices, micro_batches, chunks);
}

int32_t DefaultChunks(std::string_view name) {
  const ScheduleBuilder* b = ShapeBuilder(name);
  return b ? b->default_chunks : 1;
}

std::optional<ShapeProblem> FindShapeProblem(std::string_view name, int32_t devices, int32_t micro_batches,
                                             int32_t chunks) {
  if (devices < 1) {
    return ShapeProblem{ShapeParameter::kDevices, fmt::format("stages must be at least 1, got {}", devices)};
  }
  if (micro_batches < 1) {
    return ShapeProblem{ShapeParameter::kMicroBatches,
                        fmt::format("micro-batches must be at least 1, got {}", micro_batches)};
  }
  const ScheduleBuilder* b = ShapeBuilder(name);
  if (!b) {
    return ShapeProblem{ShapeParameter::kSchedule, fmt::format("unknown schedule '{}': expected one of {}", name,
                                                               fmt::join(BuilderNames(), ", "))};
  }
  const int32_t v = chunks == 0 ? b->default_chunks : chunks;
  if (auto problem = b->rule(PipelineShape{name, devices, micro_batches, v})) return problem;
  if (const int64_t cells = int64_t{devices} * micro_batches * v; cells > kMaxScheduleCells) {
    // The larger side is the one to shrink.
    return ShapeProblem{int64_t{devices} * v > micro_batches ? ShapeParameter::kDevices : ShapeParameter::kMicroBatches,
                        fmt::format("{} devices x {} micro-batches x {} chunks make {} (stage, micro-batch, chunk) "
                                    "cells; a schedule holds at most {} (about 700 bytes each)",
                                    devices, micro_batches, v, cells, kMaxScheduleCells)};
  }
  return std::nullopt;
}

Result<void> CheckShape(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks) {
  if (auto problem = FindShapeProblem(name, devices, micro_batches, chunks)) return Fail(std::move(problem->message));
  return {};
}

std::vector<int32_t> ChunkChoices(std::string_view name) {
  const ScheduleBuilder* b = ShapeBuilder(name);
  if (!b) return {1};
  return {b->chunk_choices.begin(), b->chunk_choices.end()};
}

Result<Schedule> BuildByName(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks) {
  if (auto ok = CheckShape(name, devices, micro_batches, chunks); !ok) return tl::unexpected(ok.error());
  const ScheduleBuilder* b = FindScheduleBuilder(name);
  if (!b) {  // `auto`: its order comes from op costs (BuildAuto)
    return Fail(fmt::format("unknown schedule '{}': expected one of {}", name, fmt::join(BuilderNames(), ", ")));
  }
  return b->build(devices, micro_batches, chunks == 0 ? b->default_chunks : chunks);
}

}  // namespace twinpipe::ir
