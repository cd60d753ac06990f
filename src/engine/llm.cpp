#include "vela/llm.h"

#include <algorithm>
#include <mutex>

#include "engine/request_generator.h"
#include "kv/block_allocator.h"
#include "kv/kv_cache.h"
#include "model/llama_forward.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace vela {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "?";
}

class LLM::Impl {
 public:
  std::shared_ptr<const Model> model;
  Tokenizer tokenizer;
  std::unique_ptr<LlamaForward> forward;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<BlockAllocator> blocks;
  std::mutex mutex;  // one generate() at a time: the forward pass and cache are single-user

  Impl(std::shared_ptr<const Model> m, Tokenizer t) : model(std::move(m)), tokenizer(std::move(t)) {}
};

LLM::LLM(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LLM::~LLM() = default;

Result<std::unique_ptr<LLM>> LLM::load(const LLMConfig& config) {
  if (config.max_batch_tokens <= 0) return make_error("max_batch_tokens must be positive");
  if (config.max_context < 0) return make_error("max_context must not be negative");
  if (config.n_threads < 0) return make_error("n_threads must not be negative");
  auto kv_type = parse_kv_type(config.kv_cache_type);
  if (!kv_type) return kv_type.error();
  auto model = Model::load(config.model_path);
  if (!model) return model.error();
  auto tokenizer = Tokenizer::from_gguf((*model)->gguf());
  if (!tokenizer) return make_error("'" + config.model_path + "': " + tokenizer.message());
  const ModelConfig& mc = (*model)->config();
  if (tokenizer->n_vocab() != mc.n_vocab)
    return make_error("'" + config.model_path + "': tokenizer and model disagree on the vocabulary size");

  auto impl = std::make_unique<Impl>(std::move(*model), std::move(*tokenizer));
  ForwardOptions fo;
  fo.max_context = config.max_context > 0 ? config.max_context : std::min(mc.n_ctx_train, 4096);
  fo.max_batch_tokens = std::min(config.max_batch_tokens, fo.max_context);
  fo.max_logits = 1;
  fo.n_threads = config.n_threads;  // 0 = physical cores
  impl->forward = std::make_unique<LlamaForward>(impl->model, fo);
  KvCacheConfig kc;
  kc.n_layer = mc.n_layer;
  kc.n_head_kv = mc.n_head_kv;
  kc.head_dim = mc.head_dim;
  kc.block_size = 16;
  kc.n_blocks = (fo.max_context + kc.block_size - 1) / kc.block_size;
  kc.type = *kv_type;
  impl->cache = std::make_unique<KvCache>(kc);
  impl->blocks = std::make_unique<BlockAllocator>(kc.n_blocks);
  return std::unique_ptr<LLM>(new LLM(std::move(impl)));
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params) {
  return generate(prompts, params, StreamCallback{});
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params, const StreamCallback& on_delta) {
  if (auto st = Sampler::validate(params); !st) return st.error();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  RequestGenerator generator(*impl_->forward, *impl_->cache, *impl_->blocks, impl_->tokenizer);
  std::vector<RequestOutput> outputs;
  outputs.reserve(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput r;
    r.prompt = prompts[i];
    r.prompt_token_ids = impl_->tokenizer.encode(prompts[i], /*add_special=*/true, /*parse_special=*/true);
    auto out = generator.run(i, r.prompt_token_ids, params, on_delta, r.metrics);
    if (!out) return make_error("prompt " + std::to_string(i) + ": " + out.message());
    r.output = std::move(*out);
    outputs.push_back(std::move(r));
  }
  return outputs;
}

std::vector<int32_t> LLM::tokenize(const std::string& text, bool add_special) const {
  return impl_->tokenizer.encode(text, add_special, /*parse_special=*/true);
}

std::string LLM::detokenize(const std::vector<int32_t>& tokens) const { return impl_->tokenizer.decode(tokens); }

LLM::Info LLM::info() const {
  const ModelConfig& c = impl_->model->config();
  return Info{c.arch_name, c.name, c.n_vocab, impl_->forward->options().max_context,
              c.n_embd,    c.n_layer, c.n_head, c.n_head_kv};
}

}  // namespace vela
