// The twinpipe config (DESIGN.md section 6): model, training, pipeline and
// cluster sections, loaded with complete validation. Every error names the
// file, the JSON path and what was expected.
//
//   Result<Config> c = LoadConfig(text, "examples/quickstart.json");
//   c->model.layers.size(); c->pipeline.stages; c->cluster.devices[0].name;
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cost_models/catalogue.h"
#include "cost_models/compute_model.h"
#include "cost_models/generators.h"
#include "cost_models/memory_model.h"
#include "cost_models/model.h"
#include "cost_models/partition_algorithm.h"
#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/result.h"

namespace twinpipe::cost {

// How data-parallel replicas hold the training state (ZeRO's stages):
// kNone, every replica all of it; kOptimizer, Megatron's distributed
// optimizer (ZeRO-1: the optimizer state sharded, gradients reduce-scattered
// and parameters all-gathered, beside the last backward and the first
// forward); kFull, FSDP / ZeRO-3 (everything sharded, each layer's weights
// gathered for its forward and backward, its gradients reduce-scattered).
enum class DataParallelSharding { kNone, kOptimizer, kFull };
inline constexpr ir::NameTable<DataParallelSharding, 3> kDataParallelShardingNames{{
    {"none", DataParallelSharding::kNone}, {"optimizer", DataParallelSharding::kOptimizer},
    {"full", DataParallelSharding::kFull}}};

// Where each GPU of a run sits (Megatron-Core's rank order, fastest first):
// tensor, context, then the pipeline's devices, then the replicas
// ("tp-cp-pp-dp", twinpipe's default), or the replicas before the pipeline
// ("tp-cp-dp-pp", Megatron-Core's default order).
enum class RankOrder { kPipelineFirst, kDataFirst };
inline constexpr ir::NameTable<RankOrder, 2> kRankOrderNames{{
    {"tp-cp-pp-dp", RankOrder::kPipelineFirst}, {"tp-cp-dp-pp", RankOrder::kDataFirst}}};

struct TrainingConfig {
  int64_t batch = 1;          // mini-batch N, samples
  int micro_batches = 1;      // M
  std::string optimizer = "adam";
  double bytes_per_param = 12;  // weights + gradients + optimizer state (GPipe's figure)
  DataParallelSharding sharding = DataParallelSharding::kNone;  // `data_parallel_sharding`
  // FP8 training with the weights held in FP8 (Transformer Engine's
  // fp8_model_init, NeMo's fp8_params): they replace the BF16 weights rather
  // than adding FP8 copies beside them, and the distributed optimizer
  // gathers them in FP8.
  bool fp8_params = false;
  // `"gradient_dtype"`: the weight gradients kept across the micro-batches
  // and reduced across the replicas (Megatron's main_grad): fp32, or the
  // weights' own half precision (NeMo's grad_reduce_in_fp32 false, Megatron-
  // LM's --grad-reduce-in-bf16). Default: DefaultGradientDtype(/model/dtype).
  // What bytes_per_param counts for the gradient is the config's to say.
  Dtype gradient_dtype = Dtype::kFp32;
  double learning_rate = 1e-3;
  double momentum = 0.9;
  int64_t seed = 1;
  int steps = 1;

  int64_t MicroBatchSize() const { return batch / micro_batches; }
};

struct PipelineConfig {
  int stages = 1;                       // K: pipeline devices
  std::string schedule = "gpipe";
  int chunks = 0;                       // stages per device; 0: the schedule's default
  int Chunks() const;                   // chunks, or the schedule's default
  ir::RecomputeMode recompute = ir::RecomputeMode::kFull;
  // `"recompute_timing"`: "overlapped" (default, torchgpipe: a recompute
  // runs before its gradient arrives, overlapping the wait) or "in-backward"
  // (Megatron-LM: the forward is re-run inside the backward call, once the
  // gradient is in).
  ir::RecomputeTiming recompute_timing = ir::RecomputeTiming::kOverlapped;
  // `"recompute_granularity"`: "cell" (default, GPipe's: the cell keeps its
  // boundary input and R rebuilds the whole cell) or "layer" (Megatron-LM's:
  // every layer keeps its input, one layer's activations rebuilt at a time);
  // `"distribute_saved_activations"` (layer only, t > 1): Megatron's split
  // of the kept inputs across the tensor-parallel group (memory_model.h).
  Checkpointing checkpointing;
  PartitionAlgorithm partition = PartitionAlgorithm::kMinMax;  // how the model is cut into cells
  std::vector<int> first_layers;        // manual: first layer of each cell
  // megatron: the embedding and the loss (the head) each take a block's
  // share of a cell (Megatron-Core's account_for_embedding_in_pipeline_split
  // and account_for_loss_in_pipeline_split).
  bool account_for_embedding = false;
  bool account_for_loss = false;
  // Megatron-LM's tensor parallelism: each pipeline device of the schedule
  // is a group of t GPUs inside one node (transformer generator only).
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  // Context parallelism: each pipeline device's GPUs are c tensor-parallel
  // groups, each with seq / c tokens of every sample.
  int context_parallel = 1;
  // Expert parallelism (mixture of experts): the experts divided over e GPUs
  // of the c x replicas that hold the same other weights (Megatron-Core's
  // order tensor, context, expert, data: an expert-parallel group is c x
  // replicas' first e, the rest of them expert data parallelism).
  int expert_parallel = 1;
  // Expert tensor parallelism: each expert split over et GPUs of the
  // tensor-parallel group (0: all t of them). With et < t the expert-parallel
  // group also takes GPUs of the tensor-parallel group (Megatron-Core's
  // expert order: expert tensor, expert, expert data).
  int expert_tensor_parallel = 0;
  // Tensor-parallel collectives beside their GEMMs (Transformer Engine's
  // userbuffers; needs sequence parallelism).
  bool tp_comm_overlap = false;
  // The framework's pipeline transfers block compute (`"p2p": "blocking"`):
  // Megatron-LM's send/receive calls wait for the transfer, and the
  // receiver's all-gather of a tensor-parallel boundary, before the next
  // kernel. Default (`"overlapped"`): transfers run beside compute, as
  // twinpipe's GPU executor and asynchronous send/recv frameworks run them.
  bool blocking_p2p = false;
  // Bytes per device the `auto` schedule plans its order to and the memory
  // partition cuts to (0: each device's memory; a device's own memory when
  // less). Only where PlansToMemoryCap.
  double memory_cap = 0;
  // The auto schedule or the memory partition: what memory_cap bounds.
  bool PlansToMemoryCap() const;
};

inline bool PipelineConfig::PlansToMemoryCap() const {
  return schedule == ir::kAutoSchedule || partition == PartitionAlgorithm::kMemory;
}

inline int PipelineConfig::Chunks() const { return chunks > 0 ? chunks : ir::DefaultChunks(schedule); }

struct ClusterConfig {
  std::vector<Device> devices;  // one per GPU (heterogeneous clusters list several kinds): t x K x R
  Link link;                    // inside a node (tensor-parallel collectives, pipeline and data-parallel traffic there)
  Link inter_node_link;         // between nodes (default ib-hdr)
  int gpus_per_node = 1;        // default: every device in one node
  // The physical GPUs the devices run on: cluster device w on GPU w mod
  // `gpus` (the CUDA executor's placement on a machine with fewer GPUs than
  // devices). Devices on one GPU share it: their compute ops run at once,
  // each at 1/n of its speed. 0: each device its own GPU.
  int gpus = 0;
  RankOrder rank_order = RankOrder::kPipelineFirst;  // `placement`
  // An explicit override of every device's achievable GEMM fraction of peak
  // (the catalogue's gemm_efficiency otherwise).
  std::optional<double> efficiency;

  int NumDevices() const { return static_cast<int>(devices.size()); }
  double GemmEfficiency(const Device& d) const { return efficiency.value_or(d.gemm_efficiency); }
};

struct Config {
  std::string source;
  std::string generator;  // "transformer", "mlp", "cnn" or "" for an explicit layer list
  std::optional<TransformerSpec> transformer;
  std::optional<MlpSpec> mlp;
  std::optional<CnnSpec> cnn;
  Model model;
  TrainingConfig training;
  PipelineConfig pipeline;
  ClusterConfig cluster;
  // Set on a copy whose pipeline.stages and cluster.devices describe cells
  // rather than the run's GPUs (the partitioner's copy for a schedule of
  // several stages a device: a device per stage): the pipeline devices and
  // GPUs the run lays out, which the replicas and the GPU placement below
  // read. Unset: pipeline.stages and the cluster's devices.
  struct GpuLayout {
    int pipeline_devices = 0;
    int gpus = 0;
  };
  std::optional<GpuLayout> gpu_layout;

  // Pipeline devices and GPUs of the run (gpu_layout, else the config's).
  int PipelineDevices() const { return gpu_layout ? gpu_layout->pipeline_devices : pipeline.stages; }
  int Gpus() const { return gpu_layout ? gpu_layout->gpus : cluster.NumDevices(); }
  // GPUs of one pipeline device: t x c.
  int GpusPerDevice() const { return pipeline.tensor_parallel * pipeline.context_parallel; }
  // Data-parallel replicas: the GPUs over t x c x K.
  int Replicas() const { return Gpus() / (PipelineDevices() * GpusPerDevice()); }
  // The GPUs that reduce each gradient: the replicas' and the context-
  // parallel group's (each holds the same weights).
  int GradientRanks() const { return Replicas() * pipeline.context_parallel; }
  // The GPU of tensor rank 0 of context rank `context` of pipeline device
  // `device` in replica `replica` (cluster.rank_order).
  int64_t GpuOf(int context, int device, int replica) const {
    const int64_t t = pipeline.tensor_parallel, c = pipeline.context_parallel;
    const int64_t outer = cluster.rank_order == RankOrder::kPipelineFirst
                              ? device + int64_t{PipelineDevices()} * replica
                              : replica + int64_t{Replicas()} * device;
    return t * (context + c * outer);
  }
  // The node of pipeline device d in the first replica (its tensor- and
  // context-parallel GPUs follow it).
  int NodeOf(int device) const { return static_cast<int>(GpuOf(0, device, 0) / cluster.gpus_per_node); }
  // Nodes the context-parallel group of a pipeline device spans.
  int ContextNodes() const;
  // Nodes the gradient group (GradientRanks) of pipeline device d spans.
  int GradientNodes(int device) const;
  // Nodes an expert-parallel group spans (the first e of the c x replicas
  // GPUs of a pipeline device's tensor rank 0, context rank first).
  int ExpertNodes() const;
  // The GPUs that all-gather a received pipeline boundary: the t of a
  // tensor-parallel group, each sent 1/t of it; 1 (none) without tensor
  // parallelism, or with sequence parallelism, where it stays sharded.
  int BoundaryGatherRanks() const {
    return pipeline.tensor_parallel > 1 && !pipeline.sequence_parallel ? pipeline.tensor_parallel : 1;
  }
};

// Distinct nodes of `per_node` GPUs among `blocks` runs of GPUs, run r
// covering first + r x stride to that + span at steps of at most per_node
// (a run never reaching the next one's start: stride > span), in O(per_node)
// steps: the gradient group's nodes (Config::GradientNodes) for any count
// of replicas.
int64_t BlockNodes(int64_t first, int64_t stride, int64_t blocks, int64_t span, int64_t per_node);

Result<Config> LoadConfig(std::string_view text, std::string_view source);
// A config parsed already, found at JSON path `path` of `source` (a table of
// runs' "/config" of "runs.jsonl:3"): messages name source and the whole
// path ("runs.jsonl:3: /config/model/layers: ..."); Config::source is
// "runs.jsonl:3: /config".
Result<Config> LoadConfig(const nlohmann::json& document, std::string_view source, std::string_view path);
Result<Config> LoadConfigFile(const std::string& path);

// A copy of `config` whose cluster lists no devices, for a caller that lists
// its own (a search over 16,384 GPUs does not copy them per point). It
// names every member of Config and ClusterConfig but the device list: a new
// member goes there too (Config.CopyWithoutDevicesKeepsEverythingElse binds
// each struct's members by count, so it stops compiling until it does).
Config CopyWithoutDevices(const Config& config);

// For a generator model: rebuilds it with `layers` (the generator's own
// count: transformer and CNN blocks, MLP layers). False for an explicit
// layer list.
bool Regenerate(Config& config, int layers);

// The model's parameter count: the sum of its layers' parameters as its
// generator builds it on one GPU. A generated transformer's layers describe
// one GPU of a tensor-parallel group (1/t of the split weights, all of the
// norms and the biases every rank keeps), so it is counted as built at
// tensor_parallel 1, its padded vocabulary included; another model as it is.
double ModelParameters(const Config& config);

// Where the config's layers' collectives run (its links, and the nodes its
// context- and data-parallel groups span).
CollectiveLinks LinksOf(const Config& config);

// Sets the pipeline's tensor and sequence parallelism and recompute mode,
// regenerating a generated transformer when its costs change with them
// (they split its GEMMs, add its collectives, and selective recompute
// moves the attention core's work into the backward), or with the
// pipeline's context parallelism and tensor-parallel overlap.
void SetParallelism(Config& config, int tensor_parallel, bool sequence_parallel, ir::RecomputeMode recompute);

}  // namespace twinpipe::cost
