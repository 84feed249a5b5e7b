// Schedule builders: compute-only programs (F, B or I and W, STEP). The
// GPipe-family builders place one stage per device (stage s -> device s); the
// chunked ones (interleaved, zb-v) place v stages per device. Passes then add
// recompute and comm.
//
//   Schedule s = Build1F1B(/*stages=*/4, /*micro_batches=*/8);
//   InsertRecompute(s, RecomputeMode::kFull); InsertComm(s, {});
//   Result<Schedule> v = BuildByName("interleaved", /*devices=*/4, /*micro_batches=*/8, /*chunks=*/2);
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

// Model parallelism without pipelining (GPipe Figure 2b): each micro-batch's
// forward and backward run through all stages before the next one starts
// (gradient accumulation); with M = 1 it is the paper's figure exactly.
Schedule BuildNaive(int32_t stages, int32_t micro_batches);

// GPipe (Figure 2c): every stage runs all M forwards, then all M backwards,
// last micro-batch first (its activations are the freshest).
Schedule BuildGpipe(int32_t stages, int32_t micro_batches);

// 1F1B / PipeDream-flush: stage s runs min(K-s-1, M) warm-up forwards, then
// alternates one forward and one backward, then drains the backwards; at most
// min(K-s, M) forwards of stage s await their backward.
Schedule Build1F1B(int32_t stages, int32_t micro_batches);

// Megatron-LM's interleaved 1F1B: K devices, v chunks each, K*v stages with
// stage c*K + d (chunk c) on device d. The micro-batches go through the
// chunks in groups of N (InterleavedGroup): the first N through chunk 0,
// then chunk 1, ..., then the next N (the last group takes what is left);
// backwards the same with the chunks in reverse. Device d runs
// (K-d-1)*2 + (v-1)*N warm-up forwards (at most M*v), then alternates, as
// Megatron-Core's schedule table does. Needs v >= 2 and M >= K.
Result<Schedule> BuildInterleaved(int32_t devices, int32_t micro_batches, int32_t chunks);

// The micro-batches of a group of BuildInterleaved (Megatron-Core's
// microbatch_group_size_per_vp_stage, N): Megatron-Core runs N from K to M
// whose last group, M mod N, is empty or at least K (a smaller one stalls
// the pipeline, and it refuses it). K where K divides M (its default, and
// Megatron-LM's only choice before it); otherwise the smallest N it takes,
// which a run of those M micro-batches must have set. 0 when M < K (no N).
int32_t InterleavedGroup(int32_t devices, int32_t micro_batches);

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2024): 1F1B's
// warm-up and order with each backward split into I (input gradient, on the
// critical path) and W (weight gradient); stage s defers its first s W's so
// that every stage keeps K micro-batches in flight and the deferred W's fill
// the drain. With T_F = T_I = T_W the bubble is a third of 1F1B's.
Schedule BuildZbH1(int32_t stages, int32_t micro_batches);
// ZB-H2 (Qi et al., ICLR 2024): stage i runs min(2(K-i)-1, M) warm-up
// forwards, then repeats I, a W once more than 2i I's are done, F; then
// drains the I's (each with its W, past the 2i deferred) and the deferred W's.
// Up to 2K-1 micro-batches in flight on stage 0: ZB-H1's memory doubled, for
// no bubble when T_F = T_I = T_W and transfers are free.
Schedule BuildZbH2(int32_t stages, int32_t micro_batches);

// ZB-V: 2 chunks per device in a V (stage s on device s for s < K, on device
// 2K-1-s after), so device 0 holds the first and the last stage. The order is
// the Zero Bubble authors' timed greedy with unit F, I and W times and at
// most 2K chunk activations per device (1F1B's peak in whole stages): with
// equal times no device idles between its first op and its last, and the
// step is the least a V allows, 3tM + (K-1)t_F per chunk time t. (Should the
// greedy not complete, list scheduling orders it: an idle device runs a
// ready I, else a ready F within the cap, else a deferred W.)
Schedule BuildZbV(int32_t devices, int32_t micro_batches);

// DualPipeV (DeepSeek-V3's DualPipe folded into a V, as torch.distributed.
// pipelining runs it): zb-v's placement; device d runs DeepSeek's eight
// phases: (K-d-1)2 chunk-0 forwards; d+1 pairs of forwards of both chunks;
// K-d-1 times chunk 1's I, W and a forward; M-2K+d+1 times the overlapped
// pairs (F0 with B1, F1 with B0, each written as its two ops in order, the
// F paired (Op::paired), as when reading OVERLAP_F_B; at the bottom of the
// V the first F0 and B1 run in turn); K-d-1 times B1 then F1 with B0; d+1 times B1
// and B0, the second half of them split into I (W deferred); K-d-1 times a
// deferred W and B0's I; then the deferred W's. Needs M >= 2K.
Result<Schedule> BuildDualPipeV(int32_t devices, int32_t micro_batches);
// Its rule, M >= 2K, checked without building (its ScheduleBuilder's rule applies it).
Result<void> CheckDualPipeV(int32_t devices, int32_t micro_batches);

// The automatic zero-bubble schedule's problem: stages on devices (one per
// device in order, or a placement such as zb-v's V), with their op times (seconds; with recompute, I's includes its R),
// the transfer time to the next stage, and activation memory per
// micro-batch: the peak while F (or R and I) runs, what it keeps from F to
// I, and from I to W (the Zero Bubble paper's M_W); and the most each
// device may hold.
struct AutoProblem {
  int32_t stages = 0, micro_batches = 0;
  std::vector<double> forward_s, input_s, weight_s;  // [stage]
  std::vector<double> comm_s;                         // [stage]: to stage + 1 (none inside a device)
  std::vector<double> activation_bytes, kept_bytes, pending_bytes;  // [stage]
  // [stage]: the boundary stage st sends to st + 1 (and receives back as its
  // gradient). Between devices, the receiver holds it from its arrival until
  // the op that uses it ends. Empty: none.
  std::vector<double> boundary_bytes;
  std::vector<double> limit_bytes;                    // [device]
  std::vector<int32_t> placement;                     // [stage]: its device; empty: stage s on device s
};

// `auto`: list scheduling with the problem's times, in the spirit of Qi et
// al.'s ZB-1p/ZB-2p heuristic (ICLR 2024): each stage runs as many warm-up
// forwards as fit before its first gradient arrives (predicted from the
// times), then an I as soon as its gradient is there, an F while memory
// allows, and a deferred W when nothing else is due, or to free memory.
// Nine variants of the rule (an extra warm-up forward, or memory alone
// bounding the warm-up; waiting for an I or F due soon rather than starting
// an F or W) are tried until one is within 0.1% of the busiest device's work;
// the schedule with the shortest overlapped step (the longest device span)
// wins, then the shortest step. It never holds more than `limit_bytes` on a
// device: activations and, with boundaries, room for every buffer other
// devices may send it whatever the timing (a forward runs only while its
// output leaves the next device room to run one). A micro-batch that alone
// exceeds a limit is an error naming the stage.
Result<Schedule> BuildAuto(const AutoProblem& problem);

// A lower bound on the peak of the schedule BuildAuto makes, from the start
// of each variant: the least, over the variants, of the most any device
// holds over the variant's first `ops` ops (as the simulator counts a
// device's activations: a forward's whole activation while it runs, then
// what it keeps; an I's restored activation while it runs, then its
// pending W's bytes), plus base[device] (its parameters and optimizer
// state). A variant stops once that reaches `enough`, so a result of
// `enough` or more says only that the peak is at least `enough`. Infinity
// when BuildAuto would fail. The start decides: the greedy fills the room
// it is given within its first few percent of ops.
double AutoLeastPeak(const AutoProblem& problem, std::span<const double> base, int64_t ops,
                     double enough = std::numeric_limits<double>::infinity());

// A random feasible problem for tests: one stage per device, times in
// [0.2, 2), transfers in [0.05, 0.5), unit activations with M_W in
// [0.1, 1), limits from one micro-batch to 2K; the same for the same seed.
AutoProblem RandomAutoProblem(int32_t stages, int32_t micro_batches, uint32_t seed);

// The shape parameter a rule refuses, for a caller to name its own field
// (a config's /pipeline/chunks, a flag's --chunks).
enum class ShapeParameter { kSchedule, kDevices, kMicroBatches, kChunks };

// Why a schedule cannot take a shape, and the parameter at fault.
struct ShapeProblem {
  ShapeParameter parameter;
  std::string message;  // "interleaved needs at least 2 chunks per device, got 1 (with 1 it is 1f1b)"
};

// What a shape rule is asked: a schedule (by the name asked for), K >= 1,
// M >= 1 and the chunks per device (never 0: the default filled in).
struct PipelineShape {
  std::string_view schedule;
  int32_t devices = 1, micro_batches = 1, chunks = 1;
};

// A schedule builder and its rules, one row of the one table that
// BuildByName, BuildShape, DefaultChunks, CheckShape, ChunkChoices and the
// config loader consult:
//   for (const ScheduleBuilder& b : ScheduleBuilders()) b.name;   // naive, gpipe, ...
//   FindScheduleBuilder("zb-v")->default_chunks;                  // 2
struct ScheduleBuilder {
  std::string_view name;
  int32_t default_chunks = 1;              // chunks per device when none are asked for
  std::span<const int32_t> chunk_choices;  // the chunk counts a search tries
  // Whether the builder takes the shape: nothing, or the problem.
  std::optional<ShapeProblem> (*rule)(const PipelineShape& shape) = nullptr;
  // Builds a shape the rule accepts.
  Result<Schedule> (*build)(int32_t devices, int32_t micro_batches, int32_t chunks) = nullptr;
};

// Every builder, in the order `--help` lists them.
std::span<const ScheduleBuilder> ScheduleBuilders();
// The builder of that name; null for another (`auto` included).
const ScheduleBuilder* FindScheduleBuilder(std::string_view name);

// The names accepted by BuildByName, in the order `--help` lists them.
const std::vector<std::string>& BuilderNames();

// `auto`: built from a plan's costs (partition::PlanFromConfig), not by name.
inline constexpr std::string_view kAutoSchedule = "auto";
// BuilderNames and `auto`: what a config's /pipeline/schedule may name.
const std::vector<std::string>& ScheduleNames();

// The compute-only shape a schedule name plans with (its partition, memory
// and search bounds): BuildByName's, and for `auto`, whose order needs op
// costs, zb-h1's (one stage per device, every backward split into I and W).
Result<Schedule> BuildShape(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks = 0);

// Chunks per device a schedule uses when none are asked for (0): 2 for
// interleaved, zb-v and dualpipev, 1 for the others.
int32_t DefaultChunks(std::string_view name);

// Dispatches on a builder name. `devices` is K; `chunks` (0: the default) is
// only meaningful for interleaved (>= 2) and zb-v (2). Unknown names, K or
// M < 1, and chunk counts a schedule cannot take are errors naming the rule.
Result<Schedule> BuildByName(std::string_view name, int32_t devices, int32_t micro_batches,
                             int32_t chunks = 0);

// The most (stage, micro-batch, chunk) cells a built schedule may have: K x
// M x chunks. About 700 bytes of ops, dependencies and output each; a
// larger shape is refused as bad input rather than run out of memory.
inline constexpr int64_t kMaxScheduleCells = int64_t{1} << 22;

// Why BuildShape would refuse (name, K, M, chunks), without building:
// nothing when it would build it (interleaved needs M >= K,
// dualpipev M >= 2K, more than kMaxScheduleCells cells, ...). The config loader names its field for the
// problem's parameter.
std::optional<ShapeProblem> FindShapeProblem(std::string_view name, int32_t devices, int32_t micro_batches,
                                             int32_t chunks = 0);

// Whether BuildShape would accept (name, K, M, chunks), without building:
// FindShapeProblem's verdict and message. Search asks this rather than
// knowing the rules.
Result<void> CheckShape(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks = 0);

// The chunk counts per device a schedule can take, for a search to try:
// interleaved 2, 4 and 8; the others their one (DefaultChunks).
std::vector<int32_t> ChunkChoices(std::string_view name);

}  // namespace twinpipe::ir
