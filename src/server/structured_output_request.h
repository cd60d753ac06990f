#pragma once
// The structured-output fields of a completions / chat request, read into
// SamplingParams::structured_outputs: OpenAI's response_format ({"type": "text"},
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": ..., "strict": ...}}),
// vLLM's structured_outputs {json, json_object, regex, choice, grammar}, and vLLM's older
// guided_json / guided_regex / guided_choice / guided_grammar. Only shapes are checked here; the
// engine compiles the constraint and a bad schema, regex or grammar comes back as a 400 naming
// the problem.
// Free functions; no thread-safety concerns.
#include <optional>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "vela/sampling_params.h"

namespace vela::server {

std::optional<ApiError> read_structured_outputs(const nlohmann::json& body, StructuredOutputs& out);

}  // namespace vela::server
