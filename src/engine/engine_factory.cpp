#include "engine/engine_factory.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>

#include "dist/tensor_group.h"
#include "engine/engine_cache.h"
#include "engine/expert_placement.h"
#include "engine/memory_guard.h"
#include "model/expert_loading.h"
#include "model/tensor_shard.h"
#include "spec/draft_model.h"

namespace vela {

Result<int32_t> kv_block_budget(const KvBudgetInput& in) {
  if (in.bytes_per_block == 0) return make_error("the KV block size in bytes is zero");
  if (in.kv_cache_bytes && in.kv_cache_fraction)
    return make_error("give either a KV cache byte budget or a memory fraction, not both");
  const int64_t per_seq = in.blocks_per_seq > 0
                              ? in.blocks_per_seq
                              : (int64_t(in.max_context) + in.block_size - 1) / in.block_size;
  const int64_t demand = per_seq * std::max(in.max_num_seqs, 1);
  std::optional<uint64_t> budget = in.kv_cache_bytes;
  if (in.kv_cache_fraction) {
    if (!(*in.kv_cache_fraction > 0.0 && *in.kv_cache_fraction <= 1.0))
      return make_error("the KV cache memory fraction must be in (0, 1]");
    if (!in.mem_available)
      return make_error("a KV cache memory fraction needs MemAvailable (/proc/meminfo)");
    budget = uint64_t(double(*in.mem_available) * *in.kv_cache_fraction);
  }
  int64_t blocks = 0;
  if (budget) {
    blocks = int64_t(*budget / in.bytes_per_block);
  } else {
    blocks = demand;
    if (in.mem_available)
      blocks =
          std::min<int64_t>(blocks, int64_t(double(*in.mem_available) * kDefaultKvMemoryFraction) /
                                        int64_t(in.bytes_per_block));
  }
  if (blocks < 1)
    return make_error("the KV cache budget holds no block (one block takes " +
                      std::to_string(in.bytes_per_block) + " bytes)");
  return int32_t(std::min<int64_t>(blocks, INT32_MAX));
}

std::optional<uint64_t> mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // reported in kB
  }
  return std::nullopt;
}

Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& o) {
  if (o.max_num_seqs <= 0 || o.max_num_seqs > 4096)
    return make_error("max_num_seqs must be in [1, 4096]");
  if (o.max_num_batched_tokens <= 0 || o.max_num_batched_tokens > 65536)
    return make_error("max_num_batched_tokens must be in [1, 65536]");
  if (o.max_context < 0) return make_error("the context length must not be negative");
  if (o.n_threads < 0 || o.n_threads > 1024) return make_error("threads must be in [0, 1024]");
  auto kv_type = parse_kv_type(o.kv_cache_type);
  if (!kv_type) return kv_type.error();
  if (o.tensor_parallel_size < 1 || o.tensor_parallel_size > 256)
    return make_error("the tensor-parallel size must be in [1, 256], got " +
                      std::to_string(o.tensor_parallel_size));
  if (o.pipeline_parallel_size < 1 || o.pipeline_parallel_size > 256)
    return make_error("the pipeline-parallel size must be in [1, 256], got " +
                      std::to_string(o.pipeline_parallel_size));
  std::shared_ptr<TensorParallel> group;
  if (o.tensor_parallel_size > 1 || o.pipeline_parallel_size > 1) {
    auto joined = dist::join(dist::ParallelSizes{o.tensor_parallel_size, o.pipeline_parallel_size});
    if (!joined) return joined.error();
    group = std::move(*joined);
    if (group->world_rank() != 0)
      return make_error("an engine runs on rank 0 of its parallel group only (this is rank " +
                        std::to_string(group->world_rank()) + ")");
  }
  auto placement = parse_expert_placement(o.moe_experts);
  if (!placement) return placement.error();
  auto opened = GgufFile::open(o.model_path);
  if (!opened) return opened.error();
  const auto file = std::make_shared<const GgufFile>(std::move(*opened));
  ModelLoadOptions load_options;
  load_options.shard = {0, o.tensor_parallel_size, 0, o.pipeline_parallel_size};
  // A first load that repacks nothing (views of the mapping) gives the config the KV budget is
  // sized from; the weights are placed and repacked once the memory guard has passed them, so a
  // model that cannot fit is refused before its repacked copy is allocated.
  ModelLoadOptions probe_options = load_options;
  probe_options.repack_weights = false;
  auto model = Model::from_gguf(file, probe_options);
  if (!model) return make_error("'" + o.model_path + "': " + model.message());
  auto tokenizer = Tokenizer::from_gguf((*model)->gguf());
  if (!tokenizer) return make_error("'" + o.model_path + "': " + tokenizer.message());
  const ModelConfig mc = (*model)->config();  // a copy: the probe is replaced below
  if (tokenizer->n_vocab() != mc.n_vocab)
    return make_error("'" + o.model_path +
                      "': tokenizer and model disagree on the vocabulary size");

  EngineConfig c;
  c.max_context = o.max_context > 0 ? o.max_context : std::min(mc.n_ctx_train, 4096);
  if (o.block_size < 1 || o.block_size > 1024)
    return make_error("KV block size must be in [1, 1024], got " + std::to_string(o.block_size));
  c.block_size = o.block_size;
  c.kv_type = *kv_type;
  c.enable_prefix_caching = o.enable_prefix_caching;
  c.n_threads = group ? dist::threads_per_rank(o.n_threads) : o.n_threads;
  c.tensor_parallel = group;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens =
      std::min(o.max_num_batched_tokens, std::max(c.max_context, 1));
  c.scheduler.priority_aging_per_second = o.priority_aging_per_second;
  if (!(o.target_itl_ms >= 0) || o.target_itl_ms > 1e7)
    return make_error("the ITL target must be in [0, 1e7] ms, got " +
                      std::to_string(o.target_itl_ms));
  if (!(o.target_itl_ratio >= 0) || o.target_itl_ratio > 1e6)
    return make_error("the ITL target ratio must be in [0, 1e6], got " +
                      std::to_string(o.target_itl_ratio));
  if (o.min_prefill_tokens < 1)
    return make_error("the minimum prefill tokens per step must be at least 1, got " +
                      std::to_string(o.min_prefill_tokens));
  c.scheduler.target_step_seconds = o.target_itl_ms / 1000.0;
  c.scheduler.target_decode_ratio = o.target_itl_ratio;
  c.scheduler.min_prefill_tokens = o.min_prefill_tokens;
  // "auto": the model's own multi-token-prediction block where the file carries one, else
  // prompt lookup. A draft file alone selects "draft", or "eagle3" when it is an EAGLE-3 head.
  std::string method_name =
      o.speculative_method == "auto" ? (mc.n_nextn_layers > 0 ? "mtp" : "ngram")
      : o.draft_model_path.empty() || o.speculative_method != "none" ? o.speculative_method
                                                                     : "draft";
  // The draft file, opened once: its architecture picks the method, then it loads.
  std::shared_ptr<const GgufFile> draft_file;
  if (!o.draft_model_path.empty()) {
    auto opened_draft = GgufFile::open(o.draft_model_path);
    if (!opened_draft) return make_error("draft model: " + opened_draft.message());
    draft_file = std::make_shared<const GgufFile>(std::move(*opened_draft));
  }
  if (method_name == "draft" && o.speculative_method == "none") {
    auto arch = draft_file->get_string("general.architecture");
    if (arch && arch->has_value() && **arch == "eagle3") method_name = "eagle3";
  }
  auto method = parse_spec_method(method_name);
  if (!method) return method.error();
  if (*method == SpecMethod::kMtp && mc.n_nextn_layers == 0)
    return make_error("'" + o.model_path +
                      "' has no multi-token-prediction layers (nextn_predict_layers): speculative "
                      "method 'mtp' needs them (use ngram or a draft model)");
  // A head keeps its K/V under the model's block ids: one layer group.
  const bool head = *method == SpecMethod::kMtp || *method == SpecMethod::kEagle3;
  if (head && model_cache_config(mc, o.block_size, 1, *kv_type, 0, true).n_groups() > 1)
    return make_error("speculative method '" + method_name +
                      "' on a model with sliding-window layers is not supported");
  if (*method == SpecMethod::kEagle3 && o.pipeline_parallel_size > 1)
    return make_error(
        "speculative method 'eagle3' reads three layers' inputs on rank 0: not with pipeline "
        "parallelism");
  c.speculative.method = *method;
  const bool takes_file = *method == SpecMethod::kDraft || *method == SpecMethod::kEagle3;
  if (takes_file && o.draft_model_path.empty())
    return make_error("speculative method '" + method_name +
                      "' needs a draft model (--draft-model FILE)");
  if (!takes_file && !o.draft_model_path.empty())
    return make_error("a draft model was given with speculative method '" + o.speculative_method +
                      "' (use 'draft' or 'eagle3', or leave the method out)");
  c.speculative.num_speculative_tokens = o.num_speculative_tokens;
  c.speculative.prompt_lookup_min = o.prompt_lookup_min;
  c.speculative.prompt_lookup_max = o.prompt_lookup_max;
  c.speculative.adaptive = o.speculative_adaptive;
  c.speculative.draft_vocab = o.speculative_draft_vocab;
  if (auto st = validate(c.speculative); !st) return st.error();
  if (*method == SpecMethod::kDraft) {
    auto draft = Model::from_gguf(draft_file);
    if (!draft) return make_error("draft model: '" + o.draft_model_path + "': " + draft.message());
    auto draft_tokenizer = Tokenizer::from_gguf((*draft)->gguf());
    if (!draft_tokenizer)
      return make_error("draft model '" + o.draft_model_path + "': " + draft_tokenizer.message());
    if (auto st = check_same_vocabulary(*tokenizer, *draft_tokenizer); !st)
      return make_error("draft model '" + o.draft_model_path + "': " + st.message());
    c.draft_model = std::move(*draft);
    if (c.draft_model->config().recurrent())
      return make_error("draft model '" + o.draft_model_path +
                        "': a model with recurrent layers cannot serve as a draft model");
  }

  KvBudgetInput budget;
  // Every pipeline stage keeps the same blocks for its own layers: budget for the largest stage.
  const int32_t kv_layers =
      most_stage_layers((*model)->whole_config().n_kv_layers, o.pipeline_parallel_size);
  // One process groups windowed layers (engine.cpp): a block then holds one group's layers, and a
  // sequence a block of every group per block_size tokens, a windowed group's only for its
  // window and a step's tokens.
  KvCacheConfig one_block =
      model_cache_config(mc, c.block_size, 1, c.kv_type, 0, /*group_windows=*/group == nullptr);
  // Pipeline stages split only models whose layers are alike (tensor_shard.cpp).
  if (o.pipeline_parallel_size > 1 && one_block.layer_shapes.empty()) one_block.n_layer = kv_layers;
  budget.bytes_per_block = KvCache::bytes_per_block(one_block);
  // The MTP block keeps its K/V in a cache of its own, one layer under the same block ids.
  if (head) {
    KvCacheConfig head_block = one_block;
    head_block.n_layer = 1;
    head_block.layer_group.clear();
    head_block.layer_shapes.clear();
    head_block.group_windows.clear();
    budget.bytes_per_block += KvCache::bytes_per_block(head_block);
  }
  const int64_t context_blocks = (int64_t(c.max_context) + c.block_size - 1) / c.block_size;
  for (int32_t g = 0; g < one_block.n_groups(); ++g) {
    const int32_t w = one_block.group_windows.empty() ? 0 : one_block.group_windows[size_t(g)];
    budget.blocks_per_seq +=
        w == 0 ? context_blocks
               : std::min<int64_t>(context_blocks,
                                   (w + c.scheduler.max_num_batched_tokens) / c.block_size + 2);
  }
  budget.max_num_seqs = o.max_num_seqs;
  budget.max_context = c.max_context;
  budget.block_size = c.block_size;
  budget.kv_cache_bytes = o.kv_cache_bytes;
  budget.kv_cache_fraction = o.kv_cache_fraction;
  budget.mem_available = mem_available_bytes();
  auto blocks = kv_block_budget(budget);
  if (!blocks) return blocks.error();
  c.n_blocks = *blocks;
  // A recurrent model's sequences also hold a state each, whatever their length, as many again
  // for prefix checkpoints, and one per proposal when they speculate (engine.cpp).
  const int64_t states_per_seq =
      1 + (c.enable_prefix_caching ? 1 : 0) +
      (c.speculative.enabled() ? c.speculative.num_speculative_tokens : 0);
  const uint64_t state_bytes =
      uint64_t(o.max_num_seqs * states_per_seq) *
      KvCache::bytes_per_state_slot(model_cache_config(mc, c.block_size, 1, c.kv_type, 1));
  const uint64_t kv_bytes = uint64_t(*blocks) * budget.bytes_per_block + state_bytes;
  const uint64_t file_bytes = uint64_t(file->file_size());
  const uint64_t expert_bytes = routed_expert_bytes(*file);
  const MemoryLimits limits = read_memory_limits();
  const ExpertPlacement placed =
      choose_expert_placement(*placement, kv_bytes, file_bytes, expert_bytes, limits);
  if (*placement == ExpertPlacement::kAuto && expert_bytes > 0)
    std::fprintf(
        stderr, "vela: %s\n",
        describe_expert_choice(placed, kv_bytes, file_bytes, expert_bytes, limits).c_str());
  const bool experts_mapped = placed == ExpertPlacement::kMapped;
  if (auto fits =
          check_memory_budget(kv_bytes, resident_weight_bytes(placed, file_bytes, expert_bytes),
                              limits, experts_mapped ? 0 : expert_bytes, experts_mapped);
      !fits)
    return fits.error();
  load_options.repack_experts = !experts_mapped;
  model = Model::from_gguf(file, load_options);
  if (!model) return make_error("'" + o.model_path + "': " + model.message());
  if (head) {
    ModelLoadOptions head_options = load_options;
    head_options.shard = {};  // the head runs whole, on this rank
    if (*method == SpecMethod::kMtp) {
      auto block = Model::mtp_block(*model, head_options);
      if (!block)
        return make_error("'" + o.model_path + "': speculative method 'mtp': " + block.message());
      c.draft_head = std::move(*block);
    } else {
      auto eagle = Model::eagle3_head(draft_file, *model, head_options);
      if (!eagle)
        return make_error("EAGLE-3 head '" + o.draft_model_path + "': " + eagle.message());
      c.draft_head = std::move(*eagle);
    }
  }
  if (group) {
    dist::ShardSetup setup;
    setup.model_path = o.model_path;
    setup.repack_experts = load_options.repack_experts;  // every rank places its experts alike
    setup.max_batch_tokens = c.scheduler.max_num_batched_tokens;
    setup.max_logits = c.scheduler.max_num_batched_tokens;  // at least the engine's rows
    setup.max_context = c.max_context;
    setup.n_threads = o.n_threads;
    setup.kv = KvCacheConfig{.n_layer = mc.n_layer,
                             .n_head_kv = mc.n_head_kv,
                             .head_dim = mc.head_dim,
                             .block_size = c.block_size,
                             .n_blocks = c.n_blocks,
                             .type = c.kv_type};
    // The same slots as rank 0's (their ids travel in the batches), each a rank's part of a state.
    setup.kv.n_state_slots = engine_cache::cache_config(**model, c).n_state_slots;
    if (auto st = dist::start_workers(*group, setup); !st) return st.error();
  }
  return std::make_unique<Engine>(std::move(*model), std::move(*tokenizer), c);
}

}  // namespace vela
