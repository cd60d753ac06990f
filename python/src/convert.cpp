#include "convert.h"

#include <limits>
#include <string>
#include <vector>

namespace vela::python {

namespace {

// A StructuredOutputsParams (types checked by its verify()); a dict schema becomes JSON text.
StructuredOutputs structured_outputs_from(const py::handle& so) {
  StructuredOutputs out;
  if (py::object schema = so.attr("json"); !schema.is_none())
    out.json = py::isinstance<py::str>(schema)
                   ? schema.cast<std::string>()
                   : py::module_::import("json").attr("dumps")(schema).cast<std::string>();
  if (py::object regex = so.attr("regex"); !regex.is_none()) out.regex = regex.cast<std::string>();
  if (py::object choice = so.attr("choice"); !choice.is_none())
    out.choice = choice.cast<std::vector<std::string>>();
  if (py::object grammar = so.attr("grammar"); !grammar.is_none())
    out.grammar = grammar.cast<std::string>();
  if (py::object any = so.attr("json_object"); !any.is_none()) out.json_object = any.cast<bool>();
  if (py::object ws = so.attr("disable_any_whitespace"); !ws.is_none())
    out.compact_whitespace = ws.cast<bool>();
  return out;
}

}  // namespace

SamplingParams sampling_params_from(const py::handle& obj) {
  SamplingParams p;
  p.n = obj.attr("n").cast<int32_t>();
  p.temperature = obj.attr("temperature").cast<float>();
  p.top_p = obj.attr("top_p").cast<float>();
  p.top_k = obj.attr("top_k").cast<int32_t>();
  p.min_p = obj.attr("min_p").cast<float>();
  p.presence_penalty = obj.attr("presence_penalty").cast<float>();
  p.frequency_penalty = obj.attr("frequency_penalty").cast<float>();
  p.repetition_penalty = obj.attr("repetition_penalty").cast<float>();
  // Any Python int: negative and huge seeds wrap to 64 bits, as the server takes JSON seeds.
  if (py::object seed = obj.attr("seed"); !seed.is_none()) {
    const unsigned long long bits = PyLong_AsUnsignedLongLongMask(seed.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
    p.seed = uint64_t(bits);
  }
  py::object max_tokens = obj.attr("max_tokens");
  p.max_tokens =
      max_tokens.is_none() ? std::numeric_limits<int32_t>::max() : max_tokens.cast<int32_t>();
  p.min_tokens = obj.attr("min_tokens").cast<int32_t>();
  if (py::object stop = obj.attr("stop"); !stop.is_none()) {
    if (py::isinstance<py::str>(stop))
      p.stop.push_back(stop.cast<std::string>());
    else
      p.stop = stop.cast<std::vector<std::string>>();
  }
  if (py::object ids = obj.attr("stop_token_ids"); !ids.is_none())
    p.stop_token_ids = ids.cast<std::vector<int32_t>>();
  p.ignore_eos = obj.attr("ignore_eos").cast<bool>();
  if (py::object lp = obj.attr("logprobs"); !lp.is_none()) p.logprobs = lp.cast<int32_t>();
  p.skip_special_tokens = obj.attr("skip_special_tokens").cast<bool>();
  if (py::object bias = obj.attr("logit_bias"); !bias.is_none())
    for (auto [token, value] : bias.cast<py::dict>())
      p.logit_bias.emplace_back(token.cast<int32_t>(), value.cast<float>());
  py::object so = obj.attr("structured_outputs");
  if (so.is_none()) so = obj.attr("guided_decoding");
  if (!so.is_none()) p.structured_outputs = structured_outputs_from(so);
  return p;
}

py::str text_to_py(std::string_view text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace");
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

namespace {

py::list token_list(const std::vector<int32_t>& ids) {
  py::list out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out[i] = py::int_(ids[i]);
  return out;
}

py::object logprobs_to_py(const CompletionOutput& c, bool requested) {
  if (!requested) return py::none();
  py::list steps(c.logprobs.size());
  for (size_t i = 0; i < c.logprobs.size(); ++i) {
    const TokenLogprobs& lp = c.logprobs[i];
    py::list top(lp.top.size());
    for (size_t k = 0; k < lp.top.size(); ++k)
      top[k] = py::make_tuple(lp.top[k].token, text_to_py(lp.top[k].text), lp.top[k].logprob);
    steps[i] = py::make_tuple(lp.token, text_to_py(lp.text), lp.logprob, std::move(top));
  }
  return steps;
}

}  // namespace

py::dict request_output_to_py(const RequestOutput& out) {
  py::list outputs(out.outputs.size());
  for (size_t i = 0; i < out.outputs.size(); ++i) {
    const CompletionOutput& c = out.outputs[i];
    py::dict d;
    d["index"] = c.index;
    d["text"] = text_to_py(c.text);
    d["token_ids"] = token_list(c.token_ids);
    d["finish_reason"] = finish_reason_name(c.finish_reason);
    d["stop_reason"] = c.stop_reason.empty() ? py::object(py::none()) : text_to_py(c.stop_reason);
    d["cumulative_logprob"] =
        c.cumulative_logprob ? py::object(py::float_(*c.cumulative_logprob)) : py::none();
    d["logprobs"] = logprobs_to_py(c, c.cumulative_logprob.has_value());
    outputs[i] = std::move(d);
  }
  py::dict d;
  d["prompt_token_ids"] = token_list(out.prompt_token_ids);
  d["outputs"] = std::move(outputs);
  return d;
}

}  // namespace vela::python
