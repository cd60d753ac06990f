#pragma once
// vela's offline C++ API, shaped like vLLM's `LLM`: load a GGUF model once, then generate text
// for a list of prompts with SamplingParams, in full or streamed token by token.
//
//   auto llm = vela::LLM::load({.model_path = "model.gguf"});
//   vela::SamplingParams params; params.temperature = 0; params.max_tokens = 32;
//   auto outputs = (*llm)->generate({"Once upon a time"}, params);
//   // (*outputs)[0].outputs[0].text
//
// generate() runs every prompt (n completions each) through the continuous-batching engine at
// once. The Python module (python/) is a layer over this API.
// Thread-safety: an LLM may be shared between threads; generate() calls are serialised (one runs
// at a time, the others wait). Callbacks run on the calling thread. tokenize, detokenize,
// apply_chat_template and info are const and safe to call concurrently with generate().
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vela/result.h"
#include "vela/sampling_params.h"

namespace vela {

struct LLMConfig {
  std::string model_path;
  int32_t n_threads = 0;              // 0 = physical cores
  int32_t max_context = 0;            // longest prompt + output; 0 = the model's, capped at 4096
  int32_t max_batch_tokens = 512;     // tokens computed per engine step (prompt chunks + decodes)
  int32_t max_num_seqs = 64;          // sequences decoded together at most
  std::string kv_cache_type = "f16";  // "f16" (default), "bf16", "q8_0" or "f32"
  int64_t kv_cache_bytes = 0;         // KV budget; 0 = enough for max_num_seqs full contexts,
                                      // at most a quarter of MemAvailable
  bool enable_prefix_caching = true;  // reuse the KV of shared prompt prefixes
  // Requests without SamplingParams::seed take seeds drawn from this one, in submission order,
  // so a script reruns the same (vLLM's `seed`); unset: random.
  std::optional<uint64_t> seed;
  // Speculative decoding: "none" (default), "ngram" (proposals looked up in the prompt and
  // output) or "draft" (a smaller model's), verified in the batched pass; greedy outputs are
  // unchanged and sampled ones keep their distribution. Up to num_speculative_tokens
  // proposals per step, matching suffixes of prompt_lookup_min..max tokens; adaptive:
  // speculate only where the measured costs and acceptance predict a speed-up.
  std::string speculative_method = "none";
  std::string draft_model_path;  // a draft model with the same vocabulary: selects "draft"
  int32_t num_speculative_tokens = 4;
  int32_t prompt_lookup_min = 1;
  int32_t prompt_lookup_max = 4;
  bool speculative_adaptive = true;
  // "mtp" proposes among the first N token ids only (0 = all): its output head shrinks to N
  // rows, the larger part of its cost for a large vocabulary.
  int64_t speculative_draft_vocab = 0;
  // Ranks each stage's layers are split over (tensor parallelism) and stages of contiguous
  // layers (pipeline parallelism): tensor_parallel_size * pipeline_parallel_size processes of
  // `mpirun -np N`, of which this is rank 0. 1 and 1 = one process.
  int32_t tensor_parallel_size = 1;
  int32_t pipeline_parallel_size = 1;
  // A mixture of experts' routed experts: "mapped" (left in the file mapping and paged in on
  // use, so a model larger than memory runs), "repacked" (into memory, faster) or "auto"
  // (default): mapped only when the model plus the KV cache would not fit in memory.
  std::string moe_experts = "auto";
};

// kStop: a stop token or string; kLength: max_tokens or the context; kAbort: cancelled.
enum class FinishReason { kStop, kLength, kAbort };
const char* finish_reason_name(FinishReason reason);  // "stop" | "length" | "abort"

struct TopLogprob {
  int32_t token = 0;
  std::string text;  // the bytes the token adds to the text (may be part of a UTF-8 character)
  float logprob = 0;
};

struct TokenLogprobs {
  int32_t token = 0;
  std::string text;
  float logprob = 0;
  std::vector<TopLogprob> top;  // the most likely alternatives, most likely first
};

struct CompletionOutput {
  int32_t index = 0;               // which of the prompt's n completions
  std::string text;                // generated text, stop string excluded
  std::vector<int32_t> token_ids;  // generated tokens
  FinishReason finish_reason = FinishReason::kLength;
  std::string stop_reason;                   // the stop string that matched, if any
  std::vector<TokenLogprobs> logprobs;       // one per generated token when params.logprobs is set
  std::optional<double> cumulative_logprob;  // sum of the tokens' logprobs, with params.logprobs
};

// Where a request's time went (wall clock, seconds).
struct RequestMetrics {
  double prefill_seconds = 0;  // computing the prompt, up to the first token's logits
  double decode_seconds = 0;   // everything after: sampling and computing generated tokens
};

struct RequestOutput {
  std::string prompt;  // the prompt's text; empty when it was given as token ids
  std::vector<int32_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;  // params.n of them, by index
  RequestMetrics metrics;                 // of the slowest completion
};

// A prompt: text (tokenized with the model's BOS rule, special tokens parsed), or token ids
// used as they are.
struct Prompt {
  Prompt(std::string text) : text(std::move(text)) {}  // NOLINT: implicit by design
  Prompt(const char* text) : text(text) {}             // NOLINT: implicit by design
  Prompt(std::vector<int32_t> ids) : token_ids(std::move(ids)), pretokenized(true) {}  // NOLINT
  std::string text;
  std::vector<int32_t> token_ids;
  bool pretokenized = false;
};

// One prompt with its own parameters (vLLM's per-prompt SamplingParams list).
struct GenerateRequest {
  Prompt prompt;
  SamplingParams params;
};

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant" | ...
  std::string content;
};

// One streamed step of one request: the text that became safe to emit (may be empty while a
// UTF-8 character or a possible stop string is incomplete) and the token that produced it.
struct StreamDelta {
  size_t request_index = 0;      // the prompt's position
  int32_t completion_index = 0;  // which of its n completions
  int32_t token = -1;            // -1 on the final delta that only flushes text
  std::string text;
  const TokenLogprobs* logprobs = nullptr;  // when requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
};
// Return false to cancel the request (it finishes with what it has, reason kAbort).
// Deltas carry the text without control tokens, whatever skip_special_tokens says.
using StreamCallback = std::function<bool(const StreamDelta&)>;

// Called between engine steps with the number of prompts whose completions have all finished;
// return false to cancel every request of the call (they finish with reason kAbort and
// generate() returns what they have). For progress bars and interrupts.
using StepCallback = std::function<bool(size_t finished, size_t total)>;

struct GenerateHooks {
  StreamCallback on_delta;
  StepCallback on_step;
};

class LLM {
 public:
  static Result<std::unique_ptr<LLM>> load(const LLMConfig& config);
  ~LLM();

  Result<std::vector<RequestOutput>> generate(const std::vector<std::string>& prompts,
                                              const SamplingParams& params);
  Result<std::vector<RequestOutput>> generate(const std::vector<std::string>& prompts,
                                              const SamplingParams& params,
                                              const StreamCallback& on_delta);
  // The general form: per-prompt parameters, text or token-id prompts, hooks. Every request is
  // checked before any is queued; an error names the prompt ("prompt 3: ...").
  Result<std::vector<RequestOutput>> generate(const std::vector<GenerateRequest>& requests,
                                              const GenerateHooks& hooks = {});

  // Tokenizer access (BOS per the model's rule when add_special; special tokens parsed).
  std::vector<int32_t> tokenize(const std::string& text, bool add_special = true) const;
  std::string detokenize(const std::vector<int32_t>& tokens, bool skip_special = true) const;

  // Renders a conversation into prompt text with the model's chat template (GGUF
  // tokenizer.chat_template) or `chat_template` (Jinja source) when given. The text holds any
  // BOS the template writes: tokenize it with add_special = false.
  Result<std::string> apply_chat_template(
      const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
      const std::optional<std::string>& chat_template = std::nullopt) const;

  struct Info {
    std::string architecture;
    std::string name;
    int32_t n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv;
    int32_t bos_token_id = -1, eos_token_id = -1;  // -1 when the model has none
  };
  Info info() const;

  class Impl;

 private:
  explicit LLM(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vela
