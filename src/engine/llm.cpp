#include "vela/llm.h"

#include <mutex>

#include "engine/engine_factory.h"

namespace vela {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "?";
}

// The offline API is a thin layer over the serving engine: generate() submits every prompt at
// once and steps the engine until all are done, so many prompts are batched continuously.
class LLM::Impl {
 public:
  explicit Impl(std::unique_ptr<Engine> e) : engine(std::move(e)) {}
  std::unique_ptr<Engine> engine;
  std::mutex mutex;  // one generate() at a time: the engine is single-threaded
};

LLM::LLM(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LLM::~LLM() = default;

Result<std::unique_ptr<LLM>> LLM::load(const LLMConfig& config) {
  EngineOptions o;
  o.model_path = config.model_path;
  o.n_threads = config.n_threads;
  o.max_context = config.max_context;
  o.max_num_seqs = config.max_num_seqs;
  o.max_num_batched_tokens = config.max_batch_tokens;
  o.kv_cache_type = config.kv_cache_type;
  if (config.kv_cache_bytes < 0) return make_error("kv_cache_bytes must not be negative");
  if (config.kv_cache_bytes > 0) o.kv_cache_bytes = uint64_t(config.kv_cache_bytes);
  o.enable_prefix_caching = config.enable_prefix_caching;
  auto engine = make_engine(o);
  if (!engine) return engine.error();
  return std::unique_ptr<LLM>(new LLM(std::make_unique<Impl>(std::move(*engine))));
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params) {
  return generate(prompts, params, StreamCallback{});
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params,
                                                 const StreamCallback& on_delta) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Engine& engine = *impl_->engine;
  std::vector<RequestOutput> outputs(prompts.size());
  std::vector<uint64_t> ids;
  std::vector<uint64_t> cancelled;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput& out = outputs[i];
    out.prompt = prompts[i];
    out.prompt_token_ids =
        engine.tokenizer().encode(prompts[i], /*add_special=*/true, /*parse_special=*/true);
    auto id = engine.add_request(out.prompt_token_ids, params, 0, [&, i](const RequestEvent& e) {
      if (e.finished) {
        outputs[i].output = *e.output;
        const RequestTimeline& t = e.request->timeline;
        outputs[i].metrics.prefill_seconds = t.prefill_seconds;
        outputs[i].metrics.decode_seconds = t.decode_seconds;
      }
      if (!on_delta) return;
      StreamDelta d;
      d.request_index = i;
      d.token = e.token;
      d.text = std::string(e.text);
      d.logprobs = e.logprobs;
      d.finished = e.finished;
      if (e.finished) d.finish_reason = e.output->finish_reason;
      if (!on_delta(d) && !e.finished) cancelled.push_back(e.request_id);
    });
    if (!id) {
      for (uint64_t started : ids) engine.abort(started);
      while (engine.has_unfinished()) (void)engine.step();
      return make_error("prompt " + std::to_string(i) + ": " + id.message());
    }
    ids.push_back(*id);
  }
  while (engine.has_unfinished()) {
    for (uint64_t id : cancelled) engine.abort(id);
    cancelled.clear();
    if (auto st = engine.step(); !st) {
      for (uint64_t id : ids) engine.abort(id);
      while (engine.has_unfinished()) (void)engine.step();
      return st.error();
    }
  }
  return outputs;
}

std::vector<int32_t> LLM::tokenize(const std::string& text, bool add_special) const {
  return impl_->engine->tokenizer().encode(text, add_special, /*parse_special=*/true);
}

std::string LLM::detokenize(const std::vector<int32_t>& tokens) const {
  return impl_->engine->tokenizer().decode(tokens);
}

LLM::Info LLM::info() const {
  const ModelConfig& c = impl_->engine->model().config();
  return Info{c.arch_name, c.name,    c.n_vocab, impl_->engine->config().max_context,
              c.n_embd,    c.n_layer, c.n_head,  c.n_head_kv};
}

}  // namespace vela
