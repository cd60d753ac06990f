#include "vela/llm.h"

#include <algorithm>
#include <mutex>
#include <random>

#include "engine/engine_factory.h"
#include "template/chat_template.h"

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
  std::mutex mutex;                      // one generate() at a time: the engine is single-threaded
  std::optional<std::mt19937_64> seeds;  // LLMConfig::seed; guarded by mutex
  std::vector<int32_t> eog_tokens;       // the model's end-of-generation ids, for min_tokens
  // The model's chat template, parsed at load; or why there is none.
  std::optional<ChatTemplate> chat_template;
  std::string chat_unavailable;
  std::string bos_text, eos_text;  // what templates see as bos_token / eos_token
};

namespace {

// The chat template of the model file, or an error saying why it has none usable.
Result<ChatTemplate> model_chat_template(const Model& model) {
  auto meta = model.gguf().get_string("tokenizer.chat_template");
  if (!meta || !*meta) return make_error("the model file has no tokenizer.chat_template");
  auto parsed = ChatTemplate::parse(**meta);
  if (!parsed) return make_error("the model's chat template is not supported: " + parsed.message());
  return parsed;
}

// The final text when control tokens are to be shown: every piece rendered, a stop token left
// out, and the text cut at the stop string as the engine does.
std::string text_with_special_tokens(const Tokenizer& tok, const CompletionOutput& out) {
  std::span<const int32_t> ids(out.token_ids);
  if (!ids.empty() && out.finish_reason == FinishReason::kStop && out.stop_reason.empty())
    ids = ids.first(ids.size() - 1);  // the stop token ends generation without adding text
  std::string text;
  for (int32_t id : ids) text += tok.piece_view(id, /*render_special=*/true);
  if (!out.stop_reason.empty()) text.resize(std::min(text.size(), text.find(out.stop_reason)));
  return text;
}

}  // namespace

Status validate_sampling_params(const SamplingParams& params) {
  return Sampler::validate(params);
}

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
  o.speculative_method = config.speculative_method;
  o.draft_model_path = config.draft_model_path;
  o.num_speculative_tokens = config.num_speculative_tokens;
  o.prompt_lookup_min = config.prompt_lookup_min;
  o.prompt_lookup_max = config.prompt_lookup_max;
  o.speculative_adaptive = config.speculative_adaptive;
  o.speculative_draft_vocab = config.speculative_draft_vocab;
  o.tensor_parallel_size = config.tensor_parallel_size;
  o.pipeline_parallel_size = config.pipeline_parallel_size;
  o.moe_experts = config.moe_experts;
  auto engine = make_engine(o);
  if (!engine) return engine.error();
  auto impl = std::make_unique<Impl>(std::move(*engine));
  const Tokenizer& tok = impl->engine->tokenizer();
  if (config.seed) impl->seeds.emplace(*config.seed);
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_eog(id)) impl->eog_tokens.push_back(id);
  auto tmpl = model_chat_template(impl->engine->model());
  if (tmpl)
    impl->chat_template = std::move(*tmpl);
  else
    impl->chat_unavailable = tmpl.message();
  if (tok.bos_id() >= 0) impl->bos_text = std::string(tok.token_text(tok.bos_id()));
  if (tok.eos_id() >= 0) impl->eos_text = std::string(tok.token_text(tok.eos_id()));
  return std::unique_ptr<LLM>(new LLM(std::move(impl)));
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params) {
  return generate(prompts, params, StreamCallback{});
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params,
                                                 const StreamCallback& on_delta) {
  std::vector<GenerateRequest> requests;
  requests.reserve(prompts.size());
  for (const std::string& p : prompts) requests.push_back(GenerateRequest{Prompt(p), params});
  return generate(requests, GenerateHooks{on_delta, {}});
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<GenerateRequest>& requests,
                                                 const GenerateHooks& hooks) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Engine& engine = *impl_->engine;
  const Tokenizer& tok = engine.tokenizer();

  // Every completion's engine parameters, checked before anything is queued.
  struct Completion {
    size_t prompt = 0;
    int32_t index = 0;
    SamplingParams params;
  };
  std::vector<RequestOutput> outputs(requests.size());
  std::vector<Completion> completions;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerateRequest& req = requests[i];
    RequestOutput& out = outputs[i];
    out.prompt = req.prompt.text;
    out.prompt_token_ids = req.prompt.pretokenized
                               ? req.prompt.token_ids
                               : tok.encode(req.prompt.text, /*add_special=*/true,
                                            /*parse_special=*/true);
    for (int32_t j = 0; j < std::max(req.params.n, 1); ++j) {
      Completion c{i, j, req.params};
      SamplingParams& p = c.params;
      // n samples of one seeded prompt differ from each other but repeat across calls (as the
      // server does); unseeded ones follow the LLM's seed.
      if (p.seed && j > 0) p.seed = *p.seed + uint64_t(j);
      if (!p.seed && impl_->seeds) p.seed = (*impl_->seeds)();
      if (p.min_tokens > 0 && !p.ignore_eos)
        p.stop_token_ids.insert(p.stop_token_ids.end(), impl_->eog_tokens.begin(),
                                impl_->eog_tokens.end());
      if (auto st = engine.validate_request(out.prompt_token_ids, p); !st)
        return make_error("prompt " + std::to_string(i) + ": " + st.message());
      completions.push_back(std::move(c));
    }
    out.outputs.resize(size_t(req.params.n));
  }

  std::vector<int32_t> remaining(requests.size());  // unfinished completions per prompt
  for (size_t i = 0; i < requests.size(); ++i) remaining[i] = int32_t(outputs[i].outputs.size());
  size_t prompts_done = 0;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> cancelled;
  const auto drain = [&] {
    for (uint64_t id : ids) engine.abort(id);
    while (engine.has_unfinished()) (void)engine.step();
  };
  for (const Completion& c : completions) {
    const size_t i = c.prompt;
    const int32_t j = c.index;
    const SamplingParams* params = &c.params;
    auto id = engine.add_request(
        outputs[i].prompt_token_ids, c.params, 0, [&, i, j, params](const RequestEvent& e) {
          if (e.finished) {
            CompletionOutput& o = outputs[i].outputs[size_t(j)];
            o = *e.output;
            o.index = j;
            if (params->logprobs) {
              double sum = 0;
              for (const TokenLogprobs& lp : o.logprobs) sum += lp.logprob;
              o.cumulative_logprob = sum;
            }
            if (!params->skip_special_tokens) o.text = text_with_special_tokens(tok, o);
            RequestMetrics& m = outputs[i].metrics;
            m.prefill_seconds = std::max(m.prefill_seconds, e.request->timeline.prefill_seconds);
            m.decode_seconds = std::max(m.decode_seconds, e.request->timeline.decode_seconds);
            if (--remaining[i] == 0) ++prompts_done;
          }
          if (!hooks.on_delta) return;
          StreamDelta d;
          d.request_index = i;
          d.completion_index = j;
          d.token = e.token;
          d.text = std::string(e.text);
          d.logprobs = e.logprobs;
          d.finished = e.finished;
          if (e.finished) d.finish_reason = e.output->finish_reason;
          if (!hooks.on_delta(d) && !e.finished) cancelled.push_back(e.request_id);
        });
    if (!id) {  // validated above, so only an engine-internal refusal lands here
      drain();
      return make_error("prompt " + std::to_string(i) + ": " + id.message());
    }
    ids.push_back(*id);
  }
  bool stopping = false;
  while (engine.has_unfinished()) {
    for (uint64_t id : cancelled) engine.abort(id);
    cancelled.clear();
    if (auto st = engine.step(); !st) {
      drain();
      return st.error();
    }
    if (!stopping && hooks.on_step && !hooks.on_step(prompts_done, requests.size())) {
      stopping = true;
      for (uint64_t id : ids) engine.abort(id);
    }
  }
  if (hooks.on_step && !stopping) (void)hooks.on_step(prompts_done, requests.size());
  return outputs;
}

std::vector<int32_t> LLM::tokenize(const std::string& text, bool add_special) const {
  return impl_->engine->tokenizer().encode(text, add_special, /*parse_special=*/true);
}

std::string LLM::detokenize(const std::vector<int32_t>& tokens, bool skip_special) const {
  return impl_->engine->tokenizer().decode(tokens, skip_special);
}

Result<std::string> LLM::apply_chat_template(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const std::optional<std::string>& chat_template) const {
  std::optional<ChatTemplate> given;
  if (chat_template) {
    auto parsed = ChatTemplate::parse(*chat_template);
    if (!parsed) return make_error("chat_template: " + parsed.message());
    given = std::move(*parsed);
  }
  const ChatTemplate* tmpl = given                  ? &*given
                             : impl_->chat_template ? &*impl_->chat_template
                                                    : nullptr;
  if (!tmpl) return make_error(impl_->chat_unavailable + "; pass a chat template (Jinja source)");
  // Templates see each message's keys in the order clients write them: role, then content.
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages)
    list.push_back(nlohmann::ordered_json{{"role", m.role}, {"content", m.content}});
  return render_chat(*tmpl, list, add_generation_prompt, impl_->bos_text, impl_->eos_text);
}

LLM::Info LLM::info() const {
  const ModelConfig& c = impl_->engine->model().whole_config();
  const Tokenizer& tok = impl_->engine->tokenizer();
  return Info{c.arch_name,  c.name,      c.n_vocab, impl_->engine->config().max_context,
              c.n_embd,     c.n_layer,   c.n_head,  c.n_head_kv,
              tok.bos_id(), tok.eos_id()};
}

}  // namespace vela
