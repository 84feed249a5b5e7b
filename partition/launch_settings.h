// A plan as launch settings: the Megatron-LM command-line flags, or the
// torchtitan TOML sections, that run a config's plan (parallel degrees,
// schedule, micro and global batch, recompute, sharding, precision, the
// model's shape and the partition), so the plan reaches the framework
// without retyping (`twinpipe export megatron|torchtitan CONFIG`).
//
//   Result<LaunchSettings> s = MegatronSettings(config);
//   fmt::print("{}", s->text);   // "--tensor-model-parallel-size 4 \\\n..."
//
// Every name written is one row of the framework's table below, read from
// the framework's own source at the commit named beside it; the lists of
// every name that source defines are kept in tests/inputs/export/ (written
// by scripts/framework_names.py) and the export tests hold each emitted name
// against them. A setting the framework cannot express is bad input naming
// the config's field; a field with no flag is left out only where it has no
// effect on the run (ExportLeftOut lists them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cost_models/config.h"
#include "ir/name_table.h"
#include "ir/result.h"

namespace twinpipe::partition {

// Megatron-LM core_v0.15.3 (commit 309ffca6a40553362d44fd17efc56b772fa1aa44),
// megatron/training/arguments.py: the last release whose arguments are all
// add_argument calls (core_v0.16 on generate many from dataclasses).
enum class MegatronFlag {
  kTensorParallel, kPipelineParallel, kVirtualStages, kLayout, kFirstStageLayers, kLastStageLayers,
  kAccountForEmbedding, kAccountForLoss, kContextParallel, kSequenceParallel, kTpCommOverlap,
  kMicroBatchSize, kGlobalBatchSize, kRecomputeGranularity, kRecomputeMethod, kRecomputeNumLayers,
  kDistributeSavedActivations, kDistributedOptimizer, kMegatronFsdp, kShardingStrategy, kOverlapGradReduce,
  kOverlapParamGather, kBf16, kFp16, kFp8Format, kFp8ParamGather, kNumLayers, kHiddenSize, kFfnHiddenSize,
  kAttentionHeads, kGroupQueryAttention, kQueryGroups, kSeqLength, kMaxPositionEmbeddings, kVocabSize,
  kVocabDivisibleBy, kSwiglu, kSquaredRelu, kNormalization, kPositionEmbedding, kDisableBiasLinear,
  kUntieEmbeddings, kAttentionBackend, kTpPpDpMapping, kNumExperts, kMoeRouterTopk, kMoeFfnHiddenSize,
  kMoeSharedExpertSize, kMoeLayerFreq, kMoeCapacityFactor, kMoePadToCapacity, kMoeGroupedGemm, kMoeDispatcher,
  kExpertParallel, kExpertTensorParallel, kMultiLatentAttention, kQLoraRank, kKvLoraRank, kQkHeadDim,
  kQkPosEmbHeadDim, kVHeadDim, kAccumulateGradsInFp32, kGradReduceInBf16, kNoOverlapP2p, kMicroBatchGroup,
};
inline constexpr ir::NameTable<MegatronFlag, 65> kMegatronFlagNames{{
    {"--tensor-model-parallel-size", MegatronFlag::kTensorParallel},
    {"--pipeline-model-parallel-size", MegatronFlag::kPipelineParallel},
    {"--num-virtual-stages-per-pipeline-rank", MegatronFlag::kVirtualStages},
    {"--pipeline-model-parallel-layout", MegatronFlag::kLayout},
    {"--decoder-first-pipeline-num-layers", MegatronFlag::kFirstStageLayers},
    {"--decoder-last-pipeline-num-layers", MegatronFlag::kLastStageLayers},
    {"--account-for-embedding-in-pipeline-split", MegatronFlag::kAccountForEmbedding},
    {"--account-for-loss-in-pipeline-split", MegatronFlag::kAccountForLoss},
    {"--context-parallel-size", MegatronFlag::kContextParallel},
    {"--sequence-parallel", MegatronFlag::kSequenceParallel},
    {"--tp-comm-overlap", MegatronFlag::kTpCommOverlap},
    {"--micro-batch-size", MegatronFlag::kMicroBatchSize},
    {"--global-batch-size", MegatronFlag::kGlobalBatchSize},
    {"--recompute-granularity", MegatronFlag::kRecomputeGranularity},
    {"--recompute-method", MegatronFlag::kRecomputeMethod},
    {"--recompute-num-layers", MegatronFlag::kRecomputeNumLayers},
    {"--distribute-saved-activations", MegatronFlag::kDistributeSavedActivations},
    {"--use-distributed-optimizer", MegatronFlag::kDistributedOptimizer},
    {"--use-megatron-fsdp", MegatronFlag::kMegatronFsdp},
    {"--data-parallel-sharding-strategy", MegatronFlag::kShardingStrategy},
    {"--overlap-grad-reduce", MegatronFlag::kOverlapGradReduce},
    {"--overlap-param-gather", MegatronFlag::kOverlapParamGather},
    {"--bf16", MegatronFlag::kBf16},
    {"--fp16", MegatronFlag::kFp16},
    {"--fp8-format", MegatronFlag::kFp8Format},
    {"--fp8-param-gather", MegatronFlag::kFp8ParamGather},
    {"--accumulate-allreduce-grads-in-fp32", MegatronFlag::kAccumulateGradsInFp32},
    {"--grad-reduce-in-bf16", MegatronFlag::kGradReduceInBf16},
    {"--no-overlap-p2p-communication", MegatronFlag::kNoOverlapP2p},
    {"--microbatch-group-size-per-virtual-pipeline-stage", MegatronFlag::kMicroBatchGroup},
    {"--num-layers", MegatronFlag::kNumLayers},
    {"--hidden-size", MegatronFlag::kHiddenSize},
    {"--ffn-hidden-size", MegatronFlag::kFfnHiddenSize},
    {"--num-attention-heads", MegatronFlag::kAttentionHeads},
    {"--group-query-attention", MegatronFlag::kGroupQueryAttention},
    {"--num-query-groups", MegatronFlag::kQueryGroups},
    {"--seq-length", MegatronFlag::kSeqLength},
    {"--max-position-embeddings", MegatronFlag::kMaxPositionEmbeddings},
    {"--vocab-size", MegatronFlag::kVocabSize},
    {"--make-vocab-size-divisible-by", MegatronFlag::kVocabDivisibleBy},
    {"--swiglu", MegatronFlag::kSwiglu},
    {"--squared-relu", MegatronFlag::kSquaredRelu},
    {"--normalization", MegatronFlag::kNormalization},
    {"--position-embedding-type", MegatronFlag::kPositionEmbedding},
    {"--disable-bias-linear", MegatronFlag::kDisableBiasLinear},
    {"--untie-embeddings-and-output-weights", MegatronFlag::kUntieEmbeddings},
    {"--attention-backend", MegatronFlag::kAttentionBackend},
    {"--use-tp-pp-dp-mapping", MegatronFlag::kTpPpDpMapping},
    {"--num-experts", MegatronFlag::kNumExperts},
    {"--moe-router-topk", MegatronFlag::kMoeRouterTopk},
    {"--moe-ffn-hidden-size", MegatronFlag::kMoeFfnHiddenSize},
    {"--moe-shared-expert-intermediate-size", MegatronFlag::kMoeSharedExpertSize},
    {"--moe-layer-freq", MegatronFlag::kMoeLayerFreq},
    {"--moe-expert-capacity-factor", MegatronFlag::kMoeCapacityFactor},
    {"--moe-pad-expert-input-to-capacity", MegatronFlag::kMoePadToCapacity},
    {"--moe-grouped-gemm", MegatronFlag::kMoeGroupedGemm},
    {"--moe-token-dispatcher-type", MegatronFlag::kMoeDispatcher},
    {"--expert-model-parallel-size", MegatronFlag::kExpertParallel},
    {"--expert-tensor-parallel-size", MegatronFlag::kExpertTensorParallel},
    {"--multi-latent-attention", MegatronFlag::kMultiLatentAttention},
    {"--q-lora-rank", MegatronFlag::kQLoraRank},
    {"--kv-lora-rank", MegatronFlag::kKvLoraRank},
    {"--qk-head-dim", MegatronFlag::kQkHeadDim},
    {"--qk-pos-emb-head-dim", MegatronFlag::kQkPosEmbHeadDim},
    {"--v-head-dim", MegatronFlag::kVHeadDim},
}};

// torchtitan v0.2.2 (commit 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce),
// torchtitan/config/job_config.py: the last release read from TOML (from
// commit 9810191 on, configs are Python functions; the same names stay its
// `--section.key` command-line options). Section and key, dotted.
enum class TorchtitanKey {
  kReplicateDegree, kShardDegree, kReshardAfterForward, kTensorDegree, kAsyncTensorParallel, kContextDegree,
  kPipelineDegree, kPipelineSchedule, kPipelineScheduleCsv, kPipelineMicrobatchSize, kModuleFqnsPerModelPart,
  kLocalBatchSize, kGlobalBatchSize, kSeqLen, kMixedPrecisionParam, kActivationCheckpointMode, kConverters,
  kFloat8Recipe, kFloat8AllGather,
};
inline constexpr ir::NameTable<TorchtitanKey, 19> kTorchtitanKeyNames{{
    {"parallelism.data_parallel_replicate_degree", TorchtitanKey::kReplicateDegree},
    {"parallelism.data_parallel_shard_degree", TorchtitanKey::kShardDegree},
    {"parallelism.fsdp_reshard_after_forward", TorchtitanKey::kReshardAfterForward},
    {"parallelism.tensor_parallel_degree", TorchtitanKey::kTensorDegree},
    {"parallelism.enable_async_tensor_parallel", TorchtitanKey::kAsyncTensorParallel},
    {"parallelism.context_parallel_degree", TorchtitanKey::kContextDegree},
    {"parallelism.pipeline_parallel_degree", TorchtitanKey::kPipelineDegree},
    {"parallelism.pipeline_parallel_schedule", TorchtitanKey::kPipelineSchedule},
    {"parallelism.pipeline_parallel_schedule_csv", TorchtitanKey::kPipelineScheduleCsv},
    {"parallelism.pipeline_parallel_microbatch_size", TorchtitanKey::kPipelineMicrobatchSize},
    {"parallelism.module_fqns_per_model_part", TorchtitanKey::kModuleFqnsPerModelPart},
    {"training.local_batch_size", TorchtitanKey::kLocalBatchSize},
    {"training.global_batch_size", TorchtitanKey::kGlobalBatchSize},
    {"training.seq_len", TorchtitanKey::kSeqLen},
    {"training.mixed_precision_param", TorchtitanKey::kMixedPrecisionParam},
    {"activation_checkpoint.mode", TorchtitanKey::kActivationCheckpointMode},
    {"model.converters", TorchtitanKey::kConverters},
    {"quantize.linear.float8.recipe_name", TorchtitanKey::kFloat8Recipe},
    {"quantize.linear.float8.enable_fsdp_float8_all_gather", TorchtitanKey::kFloat8AllGather},
}};

// What an export prints: the settings (`text`, ready to paste: flags one per
// line joined by shell continuations, or TOML) and notes for stderr (a
// behaviour of the framework the plan's prediction did not assume).
struct LaunchSettings {
  std::string text;
  std::vector<std::string> notes;
};

struct TorchtitanOptions {
  // A torch schedule CSV (`schedule --format torch-csv`) that torchtitan
  // runs instead of a schedule class; needed for twinpipe's schedules torch
  // has no class for.
  std::string schedule_csv;
};

// The flags that run `config` under Megatron-LM's pretrain_gpt.py.
Result<LaunchSettings> MegatronSettings(const cost::Config& config);
// The TOML sections torchtitan's trainer reads for `config` (its llama3
// model's module names for the partition).
Result<LaunchSettings> TorchtitanSettings(const cost::Config& config, const TorchtitanOptions& options = {});

// The config's fields no flag carries, with why each has no effect on the
// run (for --help).
std::string_view ExportLeftOut();

}  // namespace twinpipe::partition
