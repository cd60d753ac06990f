#pragma once
// The structured-output fields of a completions / chat request, read into
// SamplingParams::structured_outputs: OpenAI's response_format ({"type": "text"},
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": ..., "strict": ...}}),
// vLLM's structured_outputs {json, json_object, regex, choice, grammar}, and vLLM's older
// guided_json / guided_regex / guided_choice / guided_grammar. Only shapes are checked here; the
// engine compiles the constraint and a bad schema, regex or grammar comes back as a 400 naming
// the problem.
// Free functions; no thread-safety concerns.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "util/result.h"
#include "vela/sampling_params.h"

namespace vela::server {

// `raw_body` (the text `body` was parsed from; empty: none) gives a JSON schema its properties'
// order, which the parsed (sorted) object has lost.
std::optional<ApiError> read_structured_outputs(const nlohmann::json& body, StructuredOutputs& out,
                                                std::string_view raw_body = {});

// The object at `path` in `raw_body`, re-serialised in its written key order; nullopt when the
// body or the path is not there or not an object.
std::optional<std::string> ordered_schema_text(std::string_view raw_body,
                                               std::initializer_list<const char*> path);

// gpt-oss's harmony format writes its answer as the final channel's message, after an optional
// analysis message: `answer`'s constraint as a grammar over that whole output (the analysis text
// free but for "<|", then `<|start|>assistant<|channel|>final<|message|>`, then `answer`'s
// language). An invalid `answer` is the same error its own compilation gives.
Result<StructuredOutputs> harmony_final_answer(const StructuredOutputs& answer);

}  // namespace vela::server
