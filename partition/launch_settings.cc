#include "partition/launch_settings.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "ir/builders.h"
#include "partition/pipeline_plan.h"

namespace twinpipe::partition {
namespace {

using cost::Config;

// A refusal naming the config's field: "<file>: /pipeline/schedule: ...".
tl::unexpected<Error> Refuse(const Config& config, std::string_view path, std::string_view message) {
  return Fail(fmt::format("{}: {}: {}", config.source, path, message));
}

// One pipeline stage (cell) of the plan, in model order: its transformer
// blocks (their indices among the blocks), and whether it holds the
// embedding and the head (final norm, logits, loss).
struct StageLayers {
  int first_block = 0;
  int blocks = 0;
  bool embedding = false;
  bool head = false;
};

Result<std::vector<StageLayers>> StagesOf(const Config& config) {
  auto plan = PlanFromConfig(config);
  if (!plan) return tl::unexpected(plan.error());
  std::vector<StageLayers> stages;
  int block = 0;
  for (const cost::CellReport& cell : plan->partition.cells) {
    StageLayers s{.first_block = block};
    for (int i = cell.first_layer; i <= cell.last_layer; ++i) {
      const std::string& kind = config.model.layers[i].kind;
      if (kind == "embedding") s.embedding = true;
      if (kind == "head") s.head = true;
      if (kind == "transformer_block") ++s.blocks;
    }
    block += s.blocks;
    stages.push_back(s);
  }
  return stages;
}

int MaxBlocks(const std::vector<StageLayers>& stages) {
  int most = 0;
  for (const StageLayers& s : stages) most = std::max(most, s.blocks);
  return most;
}

bool AllBlocksEqual(const std::vector<StageLayers>& stages, size_t from, size_t to) {
  for (size_t s = from + 1; s < to; ++s) {
    if (stages[s].blocks != stages[from].blocks) return false;
  }
  return true;
}

// The schedule's transfers or recompute as Megatron-LM runs them, where the
// plan was predicted otherwise: the run is the same plan, its timing is not.
std::vector<std::string> MegatronNotes(const Config& config) {
  std::vector<std::string> notes;
  if (ir::InsertsRecompute(config.pipeline.recompute) &&
      config.pipeline.recompute_timing == ir::RecomputeTiming::kOverlapped) {
    notes.push_back(fmt::format("{}: /pipeline/recompute_timing is 'overlapped', but Megatron-LM recomputes inside "
                                "the backward ('in-backward'); predict with that to compare", config.source));
  }
  if (config.transformer && config.transformer->routing_skew > 0) {
    notes.push_back(fmt::format("{}: /model/routing_skew describes how the data routes its tokens, not a setting: "
                                "no flag carries it", config.source));
  }
  // Megatron-LM overlaps the interleaved schedule's transfers with compute
  // (overlap_p2p_comm, on unless --no-overlap-p2p-communication, which the
  // export adds for 'blocking'); its 1F1B schedule's transfers block.
  if (config.pipeline.stages > 1 && !config.pipeline.blocking_p2p && config.pipeline.schedule != "interleaved") {
    notes.push_back(fmt::format("{}: /pipeline/p2p is 'overlapped', but Megatron-LM's 1F1B schedule's transfers "
                                "block ('blocking'; it overlaps them in the interleaved schedule only); predict with "
                                "that to compare", config.source));
  }
  return notes;
}

class Flags {
 public:
  void Add(MegatronFlag flag) { lines_.emplace_back(ir::NameOf(kMegatronFlagNames, flag)); }
  template <typename T>
  void Add(MegatronFlag flag, const T& value) {
    lines_.push_back(fmt::format("{} {}", ir::NameOf(kMegatronFlagNames, flag), value));
  }
  std::string Text(std::string_view header) const {
    return fmt::format("# {}\n{}\n", header, fmt::join(lines_, " \\\n"));
  }

 private:
  std::vector<std::string> lines_;
};

// Megatron's partition flags for the plan's stages (model order: virtual
// stage v of pipeline rank p is stage v K + p): nothing for an even split;
// the account-for flags where the config's megatron partition counts the
// embedding and the loss as layers and the split is even so; the first and
// last stages' block counts where only they differ; the layout otherwise.
void AddPartition(const Config& config, const std::vector<StageLayers>& stages, int chunks, Flags& flags) {
  const bool even = AllBlocksEqual(stages, 0, stages.size());
  const auto& p = config.pipeline;
  if (!even && (p.account_for_embedding || p.account_for_loss)) {
    bool units_even = true;
    auto units = [&](const StageLayers& s) {
      return s.blocks + (p.account_for_embedding && s.embedding) + (p.account_for_loss && s.head);
    };
    for (const StageLayers& s : stages) units_even = units_even && units(s) == units(stages.front());
    if (units_even) {
      if (p.account_for_embedding) flags.Add(MegatronFlag::kAccountForEmbedding);
      if (p.account_for_loss) flags.Add(MegatronFlag::kAccountForLoss);
      if (chunks > 1) flags.Add(MegatronFlag::kVirtualStages, chunks);
      return;
    }
  }
  if (even) {
    if (chunks > 1) flags.Add(MegatronFlag::kVirtualStages, chunks);
    return;
  }
  const size_t K = stages.size();
  if (chunks == 1 && K >= 2 && AllBlocksEqual(stages, 1, K - 1) && (K == 2 || stages[1].blocks > 0)) {
    flags.Add(MegatronFlag::kFirstStageLayers, stages.front().blocks);
    flags.Add(MegatronFlag::kLastStageLayers, stages.back().blocks);
    return;
  }
  // The layout names the virtual stages itself (no virtual-stage flag beside it).
  std::vector<std::string> layout;
  for (const StageLayers& s : stages) {
    layout.push_back(fmt::format("{}{}{}", s.embedding ? "E" : "", std::string(s.blocks, 't'), s.head ? "L" : ""));
  }
  flags.Add(MegatronFlag::kLayout, fmt::format("\"{}\"", fmt::join(layout, "|")));
}

// The transformer Megatron-LM's GPT and torchtitan's llama3 build, or the refusal.
Result<const cost::TransformerSpec*> TransformerOf(const Config& config, std::string_view framework) {
  if (!config.transformer) {
    return Refuse(config, "/model/generator",
                  fmt::format("{} trains a transformer; this config's model is {}", framework,
                              config.generator.empty() ? "an explicit layer list" : config.generator));
  }
  if (!config.transformer->causal) {
    return Refuse(config, "/model/causal", fmt::format("{} trains causal language models: set it to true", framework));
  }
  return &*config.transformer;
}

}  // namespace

Result<LaunchSettings> MegatronSettings(const Config& config) {
  auto spec = TransformerOf(config, "Megatron-LM");
  if (!spec) return tl::unexpected(spec.error());
  const cost::TransformerSpec& m = **spec;
  const auto& p = config.pipeline;
  if (p.schedule != "1f1b" && p.schedule != "interleaved") {
    return Refuse(config, "/pipeline/schedule",
                  fmt::format("Megatron-LM runs 1f1b and interleaved (virtual pipeline) schedules only; '{}' has "
                              "no flag", p.schedule));
  }
  if (p.recompute == ir::RecomputeMode::kExceptLast) {
    return Refuse(config, "/pipeline/recompute", "Megatron-LM recomputes every micro-batch or none: 'except-last' "
                                                 "has no flag (use full)");
  }
  if (m.dtype == cost::Dtype::kTf32) {
    return Refuse(config, "/model/dtype", "Megatron-LM has no TF32 switch (fp32, fp16, bf16 or fp8)");
  }
  if (m.experts > 1 && m.shared_experts > 0 && m.bias) {
    return Refuse(config, "/model/bias", "Megatron-Core's shared experts have no biases (SharedExpertMLP asserts "
                                         "add_bias_linear is off): set it to false");
  }
  if (m.experts == 1) {
    return Refuse(config, "/model/experts", "one expert routes nothing (twinpipe's dense block with an MLP of "
                                            "moe_ffn), while Megatron-LM's --num-experts 1 keeps a router: give the "
                                            "dense model (no experts, ffn = moe_ffn)");
  }
  auto stages = StagesOf(config);
  if (!stages) return tl::unexpected(stages.error());
  const int chunks = p.schedule == "interleaved" ? p.Chunks() : 1;
  const int R = config.Replicas();

  Flags f;
  f.Add(MegatronFlag::kTensorParallel, p.tensor_parallel);
  f.Add(MegatronFlag::kPipelineParallel, p.stages);
  if (p.context_parallel > 1) f.Add(MegatronFlag::kContextParallel, p.context_parallel);
  if (p.sequence_parallel) f.Add(MegatronFlag::kSequenceParallel);
  if (p.tp_comm_overlap) f.Add(MegatronFlag::kTpCommOverlap);
  if (config.cluster.rank_order == cost::RankOrder::kPipelineFirst && p.stages > 1 && R > 1) {
    f.Add(MegatronFlag::kTpPpDpMapping);
  }
  AddPartition(config, *stages, chunks, f);
  if (chunks > 1 && p.stages > 1 && p.blocking_p2p) f.Add(MegatronFlag::kNoOverlapP2p);
  // Micro-batches no multiple of the stages go through the chunks in larger
  // groups (ir::InterleavedGroup), which Megatron-Core takes only when told.
  if (chunks > 1 && p.stages > 1 && config.training.micro_batches % p.stages != 0) {
    f.Add(MegatronFlag::kMicroBatchGroup, ir::InterleavedGroup(p.stages, config.training.micro_batches));
  }
  f.Add(MegatronFlag::kMicroBatchSize, config.training.MicroBatchSize());
  f.Add(MegatronFlag::kGlobalBatchSize, config.training.batch * R);

  if (ir::InsertsRecompute(p.recompute)) {
    const bool per_layer = p.checkpointing.granularity == cost::RecomputeGranularity::kLayer;
    f.Add(MegatronFlag::kRecomputeGranularity, "full");
    f.Add(MegatronFlag::kRecomputeMethod, "uniform");
    // A unit of N blocks keeps its input only; N = a whole cell re-runs it.
    f.Add(MegatronFlag::kRecomputeNumLayers, per_layer ? 1 : std::max(1, MaxBlocks(*stages)));
    if (p.checkpointing.distribute_saved_activations) f.Add(MegatronFlag::kDistributeSavedActivations);
  } else if (p.recompute == ir::RecomputeMode::kSelective) {
    f.Add(MegatronFlag::kRecomputeGranularity, "selective");
  }

  switch (config.training.sharding) {
    case cost::DataParallelSharding::kNone: break;
    case cost::DataParallelSharding::kOptimizer: f.Add(MegatronFlag::kDistributedOptimizer); break;
    case cost::DataParallelSharding::kFull:
      f.Add(MegatronFlag::kMegatronFsdp);
      f.Add(MegatronFlag::kShardingStrategy, "optim_grads_params");
      break;
  }
  if (config.GradientRanks() > 1) {
    f.Add(MegatronFlag::kOverlapGradReduce);
    if (config.training.sharding == cost::DataParallelSharding::kOptimizer) f.Add(MegatronFlag::kOverlapParamGather);
  }

  switch (m.dtype) {
    case cost::Dtype::kBf16: f.Add(MegatronFlag::kBf16); break;
    case cost::Dtype::kFp16: f.Add(MegatronFlag::kFp16); break;
    case cost::Dtype::kFp8:
      f.Add(MegatronFlag::kBf16);
      f.Add(MegatronFlag::kFp8Format, "hybrid");
      if (config.training.fp8_params) f.Add(MegatronFlag::kFp8ParamGather);
      break;
    default: break;  // fp32: no flag
  }
  // The kept gradients, where they differ from Megatron-LM's default for the
  // precision (fp16 in fp16 training, fp32 in bf16 and FP8 training).
  if (config.training.gradient_dtype != cost::DefaultGradientDtype(m.dtype)) {
    f.Add(config.training.gradient_dtype == cost::Dtype::kFp32 ? MegatronFlag::kAccumulateGradsInFp32
                                                               : MegatronFlag::kGradReduceInBf16);
  }

  f.Add(MegatronFlag::kNumLayers, m.layers);
  f.Add(MegatronFlag::kHiddenSize, m.d_model);
  f.Add(MegatronFlag::kFfnHiddenSize, m.ffn);
  f.Add(MegatronFlag::kAttentionHeads, m.heads);
  if (m.kv_heads != m.heads) {
    f.Add(MegatronFlag::kGroupQueryAttention);
    f.Add(MegatronFlag::kQueryGroups, m.kv_heads);
  }
  f.Add(MegatronFlag::kSeqLength, m.seq);
  f.Add(MegatronFlag::kMaxPositionEmbeddings, m.seq);
  // The config's vocabulary is padded already: Megatron pads to a multiple of
  // divisor x t, so a divisor of vocab / t leaves it as it is.
  f.Add(MegatronFlag::kVocabSize, m.vocab);
  const int divisor = std::gcd(m.vocab / p.tensor_parallel, 128);
  if (divisor != 128) f.Add(MegatronFlag::kVocabDivisibleBy, divisor);
  if (m.mlp == cost::MlpKind::kSwiglu) f.Add(MegatronFlag::kSwiglu);
  if (m.mlp == cost::MlpKind::kSquaredRelu) f.Add(MegatronFlag::kSquaredRelu);
  if (m.norm == cost::NormKind::kRmsNorm) f.Add(MegatronFlag::kNormalization, "RMSNorm");
  if (m.position == cost::PositionKind::kRope) f.Add(MegatronFlag::kPositionEmbedding, "rope");
  if (!m.bias) f.Add(MegatronFlag::kDisableBiasLinear);
  if (!m.tied_embeddings) f.Add(MegatronFlag::kUntieEmbeddings);
  f.Add(MegatronFlag::kAttentionBackend, m.attention == cost::AttentionKind::kFused ? "flash" : "unfused");
  if (m.Mla()) {
    f.Add(MegatronFlag::kMultiLatentAttention);
    if (m.q_lora_rank > 0) f.Add(MegatronFlag::kQLoraRank, m.q_lora_rank);
    f.Add(MegatronFlag::kKvLoraRank, m.kv_lora_rank);
    f.Add(MegatronFlag::kQkHeadDim, m.qk_head_dim);
    f.Add(MegatronFlag::kQkPosEmbHeadDim, m.qk_rope_head_dim);
    f.Add(MegatronFlag::kVHeadDim, m.v_head_dim);
  }
  if (m.experts > 1) {
    f.Add(MegatronFlag::kNumExperts, m.experts);
    f.Add(MegatronFlag::kMoeRouterTopk, m.top_k);
    f.Add(MegatronFlag::kMoeFfnHiddenSize, m.ExpertFfn());
    if (m.shared_experts > 0) f.Add(MegatronFlag::kMoeSharedExpertSize, m.shared_experts * m.ExpertFfn());
    // An integer N: blocks 0, N, 2N, ... are MoE; dense first blocks need the
    // pattern itself, one 0 or 1 a block.
    if (m.moe_first_dense > 0) {
      std::vector<int> pattern;
      for (int i = 0; i < m.layers; ++i) pattern.push_back(m.IsMoeBlock(i) ? 1 : 0);
      f.Add(MegatronFlag::kMoeLayerFreq, fmt::format("\"[{}]\"", fmt::join(pattern, ",")));
    } else if (m.moe_every > 1) {
      f.Add(MegatronFlag::kMoeLayerFreq, m.moe_every);
    }
    if (m.capacity_factor > 0) {
      f.Add(MegatronFlag::kMoeCapacityFactor, m.capacity_factor);
      f.Add(MegatronFlag::kMoePadToCapacity);  // twinpipe's capacity is padded (TransformerSpec)
    }
    if (m.grouped_gemm) f.Add(MegatronFlag::kMoeGroupedGemm);
    f.Add(MegatronFlag::kMoeDispatcher, ir::NameOf(cost::kMoeDispatcherNames, m.dispatcher));
    if (p.expert_parallel > 1) f.Add(MegatronFlag::kExpertParallel, p.expert_parallel);
    if (m.ExpertTensorParallel() != p.tensor_parallel) {
      f.Add(MegatronFlag::kExpertTensorParallel, m.ExpertTensorParallel());
    }
  }

  const std::string header = fmt::format(
      "Megatron-LM core_v0.15.3 pretrain_gpt.py: {} GPUs = tensor {} x context {} x pipeline {} x data {} "
      "(the world size sets the data-parallel size)",
      config.cluster.NumDevices(), p.tensor_parallel, p.context_parallel, p.stages, R);
  return LaunchSettings{.text = f.Text(header), .notes = MegatronNotes(config)};
}

namespace {

// torch.distributed.pipelining's schedule classes (get_schedule_class names,
// as torchtitan's pipeline_parallel_schedule takes them) for twinpipe's
// schedules of the same work; of the same order but for GPipe, whose
// backwards torch runs first micro-batch first (tests/inputs/torch_profile).
// Interleaved: torch's rounds of M / (M / K) micro-batches are the groups of
// ir::InterleavedGroup wherever torch takes M (a smaller group N >= K would
// leave r (N_t - N) >= K over, r = M / K rounds, so M >= (r + 1) K).
std::optional<std::string_view> TorchScheduleClass(std::string_view schedule) {
  static const std::map<std::string_view, std::string_view> classes{
      {"gpipe", "GPipe"}, {"1f1b", "1F1B"}, {"interleaved", "Interleaved1F1B"},
      {"zb-v", "ZBVZeroBubble"}, {"dualpipev", "DualPipeV"}};
  auto it = classes.find(schedule);
  if (it == classes.end()) return std::nullopt;
  return it->second;
}

// TOML values by section, in the order the table lists the keys.
class Toml {
 public:
  void Set(TorchtitanKey key, std::string value) {
    const std::string_view name = ir::NameOf(kTorchtitanKeyNames, key);
    const size_t dot = name.rfind('.');
    values_[static_cast<int>(key)] = {std::string(name.substr(0, dot)), std::string(name.substr(dot + 1)),
                                      std::move(value)};
  }
  std::string Text(std::string_view header) const {
    std::string out = fmt::format("# {}\n", header);
    std::vector<std::string> order;  // sections in first-use order of the table
    for (const auto& [index, entry] : values_) {
      if (std::find(order.begin(), order.end(), entry.section) == order.end()) order.push_back(entry.section);
    }
    for (const std::string& section : order) {
      out += fmt::format("\n[{}]\n", section);
      for (const auto& [index, entry] : values_) {
        if (entry.section == section) out += fmt::format("{} = {}\n", entry.key, entry.value);
      }
    }
    return out;
  }

 private:
  struct Entry {
    std::string section, key, value;
  };
  std::map<int, Entry> values_;
};

std::string Quoted(std::string_view s) { return fmt::format("\"{}\"", s); }

}  // namespace

Result<LaunchSettings> TorchtitanSettings(const Config& config, const TorchtitanOptions& options) {
  auto spec = TransformerOf(config, "torchtitan");
  if (!spec) return tl::unexpected(spec.error());
  const cost::TransformerSpec& m = **spec;
  const auto& p = config.pipeline;
  if (m.experts > 0) {
    return Refuse(config, "/model/experts", "torchtitan's llama3 model has no experts (its MoE models are model "
                                            "flavours, deepseek_v3 and llama4, that this export does not write)");
  }
  if (m.Mla()) {
    return Refuse(config, "/model/kv_lora_rank", "torchtitan's llama3 model has no multi-head latent attention");
  }
  // torchtitan's llama3 block: SwiGLU, RMSNorm, RoPE, no biases, untied
  // output, SDPA / flex attention.
  if (m.mlp != cost::MlpKind::kSwiglu) {
    return Refuse(config, "/model/mlp", "torchtitan's llama3 model has a SwiGLU MLP (\"swiglu\")");
  }
  if (m.norm != cost::NormKind::kRmsNorm) {
    return Refuse(config, "/model/norm", "torchtitan's llama3 model normalises with RMSNorm (\"rmsnorm\")");
  }
  if (m.position != cost::PositionKind::kRope) {
    return Refuse(config, "/model/position", "torchtitan's llama3 model has rotary positions (\"rope\")");
  }
  if (m.bias) return Refuse(config, "/model/bias", "torchtitan's llama3 model has no biases (false)");
  if (m.tied_embeddings) {
    return Refuse(config, "/model/tied_embeddings", "torchtitan's llama3 model has an untied output (false)");
  }
  if (m.attention != cost::AttentionKind::kFused) {
    return Refuse(config, "/model/attention", "torchtitan's attention is a fused kernel (SDPA or flex: \"fused\")");
  }
  if (p.tensor_parallel > 1 && !p.sequence_parallel) {
    return Refuse(config, "/pipeline/sequence_parallel", "torchtitan's tensor parallelism always shards the norms "
                                                         "along the sequence: set it to true");
  }
  if (p.recompute == ir::RecomputeMode::kExceptLast || p.recompute == ir::RecomputeMode::kSelective) {
    return Refuse(config, "/pipeline/recompute",
                  fmt::format("torchtitan checkpoints whole blocks or none ('full' or 'none'); '{}' has no mode "
                              "(its selective modes choose layers or ops, not Korthikanti's attention core)",
                              ir::RecomputeModeName(p.recompute)));
  }
  if (config.training.sharding == cost::DataParallelSharding::kOptimizer) {
    return Refuse(config, "/training/data_parallel_sharding", "torchtitan replicates (\"none\") or shards "
                                                              "everything with FSDP2 (\"full\"); it has no "
                                                              "optimizer-only sharding");
  }
  if (m.dtype == cost::Dtype::kFp16 || m.dtype == cost::Dtype::kTf32) {
    return Refuse(config, "/model/dtype", "torchtitan trains in bf16, fp8 (bf16 with float8 linears) or fp32");
  }
  if (config.training.gradient_dtype != cost::Dtype::kFp32) {
    return Refuse(config, "/training/gradient_dtype", "the torchtitan export reduces gradients in float32 "
                                                      "(training.mixed_precision_reduce's default): set it to fp32");
  }
  auto stages = StagesOf(config);
  if (!stages) return tl::unexpected(stages.error());
  if (p.recompute == ir::RecomputeMode::kFull &&
      p.checkpointing.granularity == cost::RecomputeGranularity::kCell && MaxBlocks(*stages) > 1) {
    return Refuse(config, "/pipeline/recompute_granularity", "torchtitan checkpoints each block on its own: set it to "
                                                             "\"layer\" (a cell of several blocks re-run as one has "
                                                             "no mode)");
  }
  std::optional<std::string_view> schedule_class = TorchScheduleClass(p.schedule);
  if (p.stages > 1 && !schedule_class && options.schedule_csv.empty()) {
    return Refuse(config, "/pipeline/schedule",
                  fmt::format("torch has no schedule class for '{}': write its order with `twinpipe schedule CONFIG "
                              "--format torch-csv -o FILE` and pass --schedule-csv FILE", p.schedule));
  }
  // torch's Interleaved1F1B runs the M micro-batches in M / K rounds (at
  // least 1) of equal size, the groups of ir::InterleavedGroup where it
  // takes them, and refuses M those rounds do not divide.
  const int M = config.training.micro_batches, rounds = std::max(1, M / p.stages);
  if (p.schedule == "interleaved" && p.stages > 1 && M % rounds != 0 && options.schedule_csv.empty()) {
    return Refuse(config, "/training/microbatches",
                  fmt::format("torch's Interleaved1F1B takes the micro-batches in {} rounds of equal size and refuses "
                              "{} on {} stages: write twinpipe's order (Megatron-Core's groups of {}) with `twinpipe "
                              "schedule CONFIG --format torch-csv -o FILE` and pass --schedule-csv FILE",
                              rounds, M, p.stages, ir::InterleavedGroup(p.stages, M)));
  }
  const int R = config.Replicas();

  Toml t;
  if (m.dtype == cost::Dtype::kFp8) t.Set(TorchtitanKey::kConverters, "[\"quantize.linear.float8\"]");
  t.Set(TorchtitanKey::kLocalBatchSize, fmt::format("{}", config.training.batch));
  t.Set(TorchtitanKey::kGlobalBatchSize, fmt::format("{}", config.training.batch * R));
  t.Set(TorchtitanKey::kSeqLen, fmt::format("{}", m.seq));
  t.Set(TorchtitanKey::kMixedPrecisionParam, Quoted(m.dtype == cost::Dtype::kFp32 ? "float32" : "bfloat16"));
  const bool shard = config.training.sharding == cost::DataParallelSharding::kFull;
  t.Set(TorchtitanKey::kReplicateDegree, fmt::format("{}", shard ? 1 : R));
  t.Set(TorchtitanKey::kShardDegree, fmt::format("{}", shard ? R : 1));
  if (shard) t.Set(TorchtitanKey::kReshardAfterForward, Quoted("always"));
  t.Set(TorchtitanKey::kTensorDegree, fmt::format("{}", p.tensor_parallel));
  if (p.tp_comm_overlap) t.Set(TorchtitanKey::kAsyncTensorParallel, "true");
  t.Set(TorchtitanKey::kContextDegree, fmt::format("{}", p.context_parallel));
  t.Set(TorchtitanKey::kPipelineDegree, fmt::format("{}", p.stages));
  if (p.stages > 1) {
    const std::string_view name = schedule_class ? *schedule_class
                                  : p.Chunks() > 1 ? "PipelineScheduleMulti"
                                                   : "PipelineScheduleSingle";
    t.Set(TorchtitanKey::kPipelineSchedule, Quoted(name));
    if (!options.schedule_csv.empty()) t.Set(TorchtitanKey::kPipelineScheduleCsv, Quoted(options.schedule_csv));
    t.Set(TorchtitanKey::kPipelineMicrobatchSize, fmt::format("{}", config.training.MicroBatchSize()));
    // Each stage's modules (llama3's names), in model order.
    std::vector<std::string> parts;
    for (const StageLayers& s : *stages) {
      std::vector<std::string> names;
      if (s.embedding) names.emplace_back("\"tok_embeddings\"");
      for (int b = s.first_block; b < s.first_block + s.blocks; ++b) names.push_back(fmt::format("\"layers.{}\"", b));
      if (s.head) {
        names.emplace_back("\"norm\"");
        names.emplace_back("\"output\"");
      }
      parts.push_back(fmt::format("[{}]", fmt::join(names, ", ")));
    }
    t.Set(TorchtitanKey::kModuleFqnsPerModelPart, fmt::format("[{}]", fmt::join(parts, ", ")));
  }
  t.Set(TorchtitanKey::kActivationCheckpointMode,
        Quoted(p.recompute == ir::RecomputeMode::kFull ? "full" : "none"));
  if (m.dtype == cost::Dtype::kFp8) {
    t.Set(TorchtitanKey::kFloat8Recipe, Quoted("tensorwise"));
    if (config.training.fp8_params && shard) t.Set(TorchtitanKey::kFloat8AllGather, "true");
  }

  const std::string header = fmt::format(
      "torchtitan v0.2.2 job config: {} GPUs = tensor {} x context {} x pipeline {} x data {}; [model] name and "
      "flavor: llama3 with {} layers, dim {}, ffn {}, {} heads, {} kv heads, vocab {}",
      config.cluster.NumDevices(), p.tensor_parallel, p.context_parallel, p.stages, R, m.layers, m.d_model, m.ffn,
      m.heads, m.kv_heads, m.vocab);
  std::vector<std::string> notes;
  if (p.stages > 1 && p.schedule == "gpipe") {
    notes.push_back(fmt::format("{}: torch's GPipe runs its backwards first micro-batch first, twinpipe's 'gpipe' "
                                "last first (the paper's): the same work and memory, another order of ops; a "
                                "torch.profiler trace of it imports against a schedule in torch's order",
                                config.source));
  }
  if (p.stages > 1 && p.blocking_p2p) {
    notes.push_back(fmt::format("{}: /pipeline/p2p is 'blocking', but torch's pipelining sends and receives "
                                "asynchronously ('overlapped'); predict with that to compare", config.source));
  }
  return LaunchSettings{.text = t.Text(header), .notes = std::move(notes)};
}

std::string_view ExportLeftOut() {
  return "Left out, with no effect on what runs: the cluster (device, links, gpus_per_node: the launcher's "
         "hosts decide them), the partition algorithm's name (its cut is written), bytes_per_param and "
         "memory_cap (modelling figures), and the optimizer, learning rate, seed and steps (yours to set, as "
         "are data, tokenizer and checkpoint flags). recompute_timing and p2p describe how a framework runs: "
         "where the plan assumed otherwise, a note on stderr says so. Refused (exit 2, naming the config "
         "field): what the framework cannot express, e.g. Megatron-LM: schedules other than 1f1b and "
         "interleaved, recompute except-last, tf32; torchtitan: a model other than llama3's block, "
         "data_parallel_sharding optimizer, recompute selective or except-last, fp16, and schedules torch has "
         "no class for unless --schedule-csv names their order.";
}

}  // namespace twinpipe::partition
