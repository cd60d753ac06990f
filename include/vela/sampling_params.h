#pragma once
// Parameters of text generation for one request, shaped like vLLM's SamplingParams.
// A plain value type: copy it freely; no thread-safety concerns.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vela/result.h"

namespace vela {

// Structured output, shaped like vLLM's StructuredOutputsParams: at most one of json,
// json_object, regex, choice and grammar; the generated text then matches it (the sampler only
// draws tokens that keep the text a prefix of a match, and end-of-generation only once it is a
// complete match). A request that reaches max_tokens first finishes with "length".
struct StructuredOutputs {
  std::optional<std::string> json;     // a JSON Schema, as JSON text
  bool json_object = false;            // any JSON object
  std::optional<std::string> regex;    // the whole output matches this regular expression
  std::vector<std::string> choice;     // the output is exactly one of these strings
  std::optional<std::string> grammar;  // a context-free grammar in GBNF (llama.cpp's syntax)
  // JSON: at most one space after ':' and ','; false allows a few spaces, tabs and newlines.
  bool compact_whitespace = true;

  bool active() const { return json || json_object || regex || !choice.empty() || grammar; }
};

// Reasoning models think between two markers before they answer. With `end` set the engine
// follows the block in the generated text (src/reasoning): a structured-output constraint
// applies only from the end marker on, and after max_tokens tokens of thinking the end marker's
// tokens are forced, so the answer still comes.
struct ReasoningControl {
  std::string start;                // "<think>"
  std::string end;                  // "</think>"
  std::vector<int32_t> end_tokens;  // `end` as tokens (forced when the budget runs out)
  bool implicit_start = false;      // the model may think without writing `start` (DeepSeek-R1)
  // Where the output begins: the server reads it off the rendered prompt's tail.
  enum class Begin { kOutputDecides, kThinking, kAnswer } begin = Begin::kOutputDecides;
  int32_t max_tokens = -1;  // tokens of thinking at most; -1 = no limit

  bool active() const { return !end.empty(); }
};

struct SamplingParams {
  // Sampling. temperature == 0 means greedy (argmax); the other filters are then ignored.
  float temperature = 1.0f;
  int32_t top_k = 0;   // 0 (or <0) = disabled; otherwise keep the k most likely tokens
  float top_p = 1.0f;  // nucleus: keep the smallest set whose mass >= top_p; 1 = disabled
  float min_p = 0.0f;  // drop tokens with p < min_p * p_max; 0 = disabled

  // Penalties over the tokens generated so far (and, for repetition, the prompt too, as vLLM).
  float repetition_penalty =
      1.0f;                        // >1 discourages repeats: logit/penalty if >0 else logit*penalty
  float presence_penalty = 0.0f;   // subtracted once from the logit of every token that appeared
  float frequency_penalty = 0.0f;  // subtracted count times

  std::optional<uint64_t> seed;  // same seed -> same output; unset -> random

  // Added to the logits of these tokens after the penalties (OpenAI's logit_bias, in
  // [-100, 100]); the reported logprobs stay those of the raw logits.
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Stopping.
  int32_t max_tokens = 16;              // generated tokens at most
  std::vector<std::string> stop;        // stop strings; the matched string is not emitted
  std::vector<int32_t> stop_token_ids;  // extra token ids that end generation
  bool ignore_eos = false;              // keep going past the model's end-of-generation tokens
  // The tokens of stop_token_ids cannot be drawn before this many tokens were generated (the
  // LLM API adds the model's end-of-generation tokens to stop_token_ids for this). Stop strings
  // still apply from the first token.
  int32_t min_tokens = 0;

  // Log-probabilities: when set, report the chosen token's logprob and the top-n alternatives
  // (n = *logprobs, 0 = only the chosen token).
  std::optional<int32_t> logprobs;

  // Used by the LLM API (the engine sees one completion per request):
  int32_t n = 1;                    // completions per prompt; completion j > 0 uses seed + j
  bool skip_special_tokens = true;  // false: the final text shows control tokens' text

  StructuredOutputs structured_outputs;  // inactive by default
  ReasoningControl reasoning;            // inactive by default

  // The first generated tokens are these, whatever the logits say (reported with their
  // logprobs as if sampled); sampling goes on after them. A test hook: `vela serve
  // --test-scripted-output` lets a request script what the model writes.
  std::vector<int32_t> forced_tokens;
};

// The checks generate() and the server make: every range, with a message naming the parameter
// ("invalid sampling parameter top_p: must be in (0, 1] (got 1.5)").
Status validate_sampling_params(const SamplingParams& params);

}  // namespace vela
