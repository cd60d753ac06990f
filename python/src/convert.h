#pragma once
// Conversions between the Python package's objects and the C++ API's types (include/vela/):
// vela.SamplingParams -> SamplingParams, RequestOutput -> plain dicts and lists that the
// package's Python code wraps in its output classes. Text goes through UTF-8 with replacement
// characters, since a piece can hold part of a character.
// Free functions; call them with the GIL held.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string_view>

#include "vela/llm.h"

namespace vela::python {

namespace py = pybind11;

// Reads the attributes of a vela.SamplingParams (or any object with the same attributes, whose
// types the Python class has already checked). max_tokens None means "up to the context".
SamplingParams sampling_params_from(const py::handle& obj);

// str from UTF-8 bytes that may be cut inside a character.
py::str text_to_py(std::string_view text);

// {"prompt_token_ids": [...], "outputs": [{"index", "text", "token_ids", "finish_reason",
//  "stop_reason", "cumulative_logprob", "logprobs"}, ...]}; logprobs is None or a list of
// (token, text, logprob, [(token, text, logprob), ...]) per generated token.
py::dict request_output_to_py(const RequestOutput& out);

}  // namespace vela::python
