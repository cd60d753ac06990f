#include "server/generation_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/sampler.h"
#include "server/structured_output_request.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

constexpr int32_t kMaxJsonDepth = 64;
constexpr int64_t kMaxPriority = 1'000'000;

// Reads optional fields of the request object with type checks; the first problem is kept.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  const std::optional<ApiError>& error() const { return error_; }
  void fail(std::string message, std::string param) {
    if (!error_) error_ = invalid_request(std::move(message), std::move(param));
  }

  // The field's value, or nullptr when absent or null.
  const json* get(const char* name) const {
    auto it = obj_.find(name);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  template <class T>
  bool number(const char* name, T& out) {
    const json* v = get(name);
    if (!v) return false;
    if (!v->is_number()) {
      fail(std::string("'") + name + "' must be a number", name);
      return false;
    }
    out = static_cast<T>(v->get<double>());
    return true;
  }

  bool integer(const char* name, int64_t lo, int64_t hi, int64_t& out) {
    const json* v = get(name);
    if (!v) return false;
    if (!v->is_number_integer()) {
      fail(std::string("'") + name + "' must be an integer", name);
      return false;
    }
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      fail(std::string("'") + name + "' is out of range", name);
      return false;
    }
    out = v->get<int64_t>();
    if (out < lo || out > hi) {
      fail(std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
               std::to_string(hi) + " (got " + std::to_string(out) + ")",
           name);
      return false;
    }
    return true;
  }

  bool boolean(const char* name, bool& out) {
    const json* v = get(name);
    if (!v) return false;
    if (!v->is_boolean()) {
      fail(std::string("'") + name + "' must be a boolean", name);
      return false;
    }
    out = v->get<bool>();
    return true;
  }

  bool string(const char* name, std::string& out) {
    const json* v = get(name);
    if (!v) return false;
    if (!v->is_string()) {
      fail(std::string("'") + name + "' must be a string", name);
      return false;
    }
    out = v->get<std::string>();
    return true;
  }

 private:
  const json& obj_;
  std::optional<ApiError> error_;
};

bool token_array(const json& v, std::vector<int32_t>& out) {
  if (!v.is_array() || v.empty()) return false;
  out.clear();
  out.reserve(v.size());
  for (const json& t : v) {
    if (!t.is_number_integer()) return false;
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) return false;
    out.push_back(int32_t(id));
  }
  return true;
}

// prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]
void read_prompts(Fields& f, const RequestLimits& limits, GenerationRequest& r) {
  const json* p = f.get("prompt");
  if (!p) return f.fail("'prompt' is required", "prompt");
  const char* kShape =
      "'prompt' must be a string, an array of strings, an array of token ids or "
      "an array of token-id arrays";
  if (p->is_string()) {
    r.prompts.push_back(PromptInput{p->get<std::string>(), {}, false});
    return;
  }
  if (!p->is_array() || p->empty()) return f.fail(kShape, "prompt");
  if ((*p)[0].is_number_integer()) {
    PromptInput in;
    in.pretokenized = true;
    if (!token_array(*p, in.tokens)) return f.fail(kShape, "prompt");
    r.prompts.push_back(std::move(in));
    return;
  }
  if (p->size() > size_t(limits.max_prompts))
    return f.fail("at most " + std::to_string(limits.max_prompts) + " prompts per request",
                  "prompt");
  for (const json& item : *p) {
    PromptInput in;
    if (item.is_string()) {
      in.text = item.get<std::string>();
    } else if (token_array(item, in.tokens)) {
      in.pretokenized = true;
    } else {
      return f.fail(kShape, "prompt");
    }
    r.prompts.push_back(std::move(in));
  }
}

// messages: [{"role": ..., "content": string | [{"type": "text", "text": ...}, ...] | null}]
// Content parts are joined with newlines (as vLLM does) so templates see plain strings.
void read_messages(Fields& f, GenerationRequest& r) {
  const json* m = f.get("messages");
  if (!m) return f.fail("'messages' is required", "messages");
  if (!m->is_array() || m->empty())
    return f.fail("'messages' must be a non-empty array", "messages");
  r.messages = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return f.fail(where + " must be an object", "messages");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string())
      return f.fail(where + ".role must be a string", "messages");
    const std::string role_name = role->get<std::string>();
    if (role_name != "system" && role_name != "user" && role_name != "assistant" &&
        role_name != "developer" && role_name != "tool")
      return f.fail(where + ".role '" + role_name +
                        "' is not one of system, developer, user, assistant, tool",
                    "messages");
    std::string content;
    auto c = msg.find("content");
    if (c == msg.end() || c->is_null()) {
      if (role_name != "assistant") return f.fail(where + ".content is required", "messages");
    } else if (c->is_string()) {
      content = c->get<std::string>();
    } else if (c->is_array()) {
      for (const json& part : *c) {
        auto type = part.is_object() ? part.find("type") : part.end();
        auto text = part.is_object() ? part.find("text") : part.end();
        if (type == part.end() || !type->is_string() || *type != "text" || text == part.end() ||
            !text->is_string())
          return f.fail(where +
                            ".content: only text parts ({\"type\": \"text\", \"text\": ...}) "
                            "are supported",
                        "messages");
        if (!content.empty()) content += '\n';
        content += text->get<std::string>();
      }
    } else {
      return f.fail(where + ".content must be a string or an array of text parts", "messages");
    }
    json out{{"role", role_name}, {"content", std::move(content)}};
    // Tool calling: an assistant's calls and a tool result's id reach the template as given.
    for (const char* key : {"tool_calls", "tool_call_id", "name", "reasoning_content", "thinking"})
      if (auto it = msg.find(key); it != msg.end() && !it->is_null()) out[key] = *it;
    // Templates index into arguments (Hugging Face's convention): JSON text becomes an object.
    if (out.contains("tool_calls") && out["tool_calls"].is_array())
      for (json& call : out["tool_calls"])
        if (call.is_object() && call.contains("function") && call["function"].is_object() &&
            call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
          json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
          if (args.is_object()) call["function"]["arguments"] = std::move(args);
        }
    r.messages.push_back(std::move(out));
  }
}

void read_stop(Fields& f, const RequestLimits& limits, SamplingParams& p) {
  const json* s = f.get("stop");
  if (!s) return;
  const char* kShape = "'stop' must be a string or an array of non-empty strings";
  if (s->is_string()) {
    if (s->get_ref<const std::string&>().empty()) return f.fail(kShape, "stop");
    p.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array()) return f.fail(kShape, "stop");
  if (s->size() > size_t(limits.max_stop))
    return f.fail("at most " + std::to_string(limits.max_stop) + " stop strings", "stop");
  for (const json& item : *s) {
    if (!item.is_string() || item.get_ref<const std::string&>().empty())
      return f.fail(kShape, "stop");
    p.stop.push_back(item.get<std::string>());
  }
}

// Options of the OpenAI API this server does not implement: refuse rather than ignore.
void refuse_unsupported(Fields& f, Endpoint endpoint) {
  bool flag = false;
  if (endpoint == Endpoint::kChatCompletions && f.boolean("echo", flag) && flag)
    f.fail("'echo' is a completions option", "echo");
  std::string suffix;
  if (f.string("suffix", suffix) && !suffix.empty()) f.fail("'suffix' is not supported", "suffix");
  if (const json* t = f.get("functions"); t && !(t->is_array() && t->empty()))
    f.fail("'functions' is not supported; use 'tools'", "functions");
  if (const json* t = f.get("tools");
      endpoint == Endpoint::kCompletions && t && !(t->is_array() && t->empty()))
    f.fail("'tools' needs /v1/chat/completions", "tools");
}

// logit_bias: {"token id": bias, ...} (OpenAI's shape: keys are decimal token ids).
void read_logit_bias(Fields& f, const RequestLimits& limits, SamplingParams& p) {
  const json* b = f.get("logit_bias");
  if (!b) return;
  const char* kShape = "'logit_bias' must map token ids (\"123\") to numbers in [-100, 100]";
  if (!b->is_object()) return f.fail(kShape, "logit_bias");
  if (b->size() > size_t(limits.max_logit_bias))
    return f.fail("at most " + std::to_string(limits.max_logit_bias) + " 'logit_bias' entries",
                  "logit_bias");
  for (const auto& [key, value] : b->items()) {
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos ||
        !value.is_number())
      return f.fail(kShape, "logit_bias");
    p.logit_bias.emplace_back(int32_t(std::stol(key)), value.get<float>());
  }
}

// Completions only: echo (the prompt's text before the output) and best_of (candidates per
// prompt, of which the n with the highest cumulative logprob are returned).
void read_completion_extras(Fields& f, const RequestLimits& limits, GenerationRequest& r) {
  f.boolean("echo", r.echo);
  int64_t best_of = 0;
  if (f.integer("best_of", 1, limits.max_best_of, best_of)) r.best_of = int32_t(best_of);
}

// Chat: template variables and the reasoning budget.
void read_chat_extras(Fields& f, GenerationRequest& r) {
  if (const json* k = f.get("chat_template_kwargs")) {
    if (!k->is_object())
      return f.fail("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const char* reserved :
         {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
      if (k->contains(reserved))
        return f.fail(std::string("'chat_template_kwargs' cannot set '") + reserved + "'",
                      "chat_template_kwargs");
    r.chat_template_kwargs = *k;
  }
  bool thinking = false;
  if (f.boolean("enable_thinking", thinking) && !r.chat_template_kwargs.contains("enable_thinking"))
    r.chat_template_kwargs["enable_thinking"] = thinking;
  std::string effort;
  if (f.string("reasoning_effort", effort) &&
      !r.chat_template_kwargs.contains("reasoning_effort")) {
    if (effort != "low" && effort != "medium" && effort != "high" && effort != "minimal")
      return f.fail("'reasoning_effort' must be minimal, low, medium or high", "reasoning_effort");
    r.chat_template_kwargs["reasoning_effort"] = effort;
  }
  int64_t v = 0;
  for (const char* name : {"max_reasoning_tokens", "thinking_token_budget"})
    if (f.integer(name, -1, std::numeric_limits<int32_t>::max(), v))
      r.max_reasoning_tokens = int32_t(v);
  if (const json* script = f.get("vela_test_script")) {
    const char* kShape = "'vela_test_script' must be {\"pieces\": [string, ...], \"eos\": boolean}";
    if (!script->is_object() || !script->contains("pieces") || !(*script)["pieces"].is_array())
      return f.fail(kShape, "vela_test_script");
    std::vector<std::string> pieces;
    for (const json& p : (*script)["pieces"]) {
      if (!p.is_string()) return f.fail(kShape, "vela_test_script");
      pieces.push_back(p.get<std::string>());
    }
    if (auto eos = script->find("eos"); eos != script->end()) {
      if (!eos->is_boolean()) return f.fail(kShape, "vela_test_script");
      r.test_script_eos = eos->get<bool>();
    }
    r.test_script = std::move(pieces);
  }
}

}  // namespace

std::optional<ApiError> parse_generation_request(std::string_view body, Endpoint endpoint,
                                                 const RequestLimits& limits,
                                                 GenerationRequest& r) {
  if (json_nesting_depth(body) > kMaxJsonDepth)
    return invalid_request("the JSON body is nested too deeply");
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (406)
    return invalid_request(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return invalid_request("the body must be a JSON object");

  Fields f(doc);
  r = GenerationRequest();
  r.endpoint = endpoint;
  SamplingParams& p = r.params;
  f.string("model", r.model);
  if (endpoint == Endpoint::kCompletions)
    read_prompts(f, limits, r);
  else
    read_messages(f, r);
  refuse_unsupported(f, endpoint);
  if (auto error = read_structured_outputs(doc, p.structured_outputs, body)) return error;
  if (endpoint == Endpoint::kChatCompletions) {
    if (auto error = read_tool_request(doc, r.tools, body)) return error;
    read_chat_extras(f, r);
  }

  int64_t v = 0;
  // Chat prefers max_completion_tokens (max_tokens is its deprecated alias).
  if (f.integer("max_tokens", 0, std::numeric_limits<int32_t>::max(), v)) {
    p.max_tokens = int32_t(v);
    r.max_tokens_given = true;
  }
  if (f.integer("max_completion_tokens", 0, std::numeric_limits<int32_t>::max(), v)) {
    p.max_tokens = int32_t(v);
    r.max_tokens_given = true;
  }
  if (!r.max_tokens_given)
    p.max_tokens = endpoint == Endpoint::kCompletions ? 16 : limits.default_chat_max_tokens;

  f.number("temperature", p.temperature);
  f.number("top_p", p.top_p);
  f.number("min_p", p.min_p);
  f.number("presence_penalty", p.presence_penalty);
  f.number("frequency_penalty", p.frequency_penalty);
  f.number("repetition_penalty", p.repetition_penalty);
  if (f.integer("top_k", -1, std::numeric_limits<int32_t>::max(), v)) p.top_k = int32_t(v);
  if (f.integer("n", 1, limits.max_n, v)) r.n = int32_t(v);
  if (const json* s = f.get("seed")) {
    if (!s->is_number_integer())
      f.fail("'seed' must be an integer", "seed");
    else
      p.seed = s->is_number_unsigned() ? s->get<uint64_t>() : uint64_t(s->get<int64_t>());
  }
  read_stop(f, limits, p);
  if (const json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array() || ids->size() > size_t(limits.max_stop_token_ids) ||
        (!ids->empty() && !token_array(*ids, p.stop_token_ids)))
      f.fail("'stop_token_ids' must be an array of at most " +
                 std::to_string(limits.max_stop_token_ids) + " token ids",
             "stop_token_ids");
  }
  f.boolean("ignore_eos", p.ignore_eos);
  read_logit_bias(f, limits, p);
  if (endpoint == Endpoint::kCompletions) read_completion_extras(f, limits, r);
  // vLLM's convention: a lower priority value is served first; the engine wants higher first.
  if (f.integer("priority", -kMaxPriority, kMaxPriority, v)) r.priority = int32_t(-v);
  f.string("user", r.user);

  if (endpoint == Endpoint::kCompletions) {
    if (f.integer("logprobs", 0, Sampler::kMaxLogprobs, v)) {
      r.logprobs = true;
      r.top_logprobs = int32_t(v);
    }
  } else {
    f.boolean("logprobs", r.logprobs);
    if (f.integer("top_logprobs", 0, Sampler::kMaxLogprobs, v)) {
      r.top_logprobs = int32_t(v);
      if (!r.logprobs) f.fail("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    }
  }
  if (r.logprobs) p.logprobs = r.top_logprobs;

  f.boolean("stream", r.stream);
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) {
      f.fail("'stream_options' must be an object", "stream_options");
    } else if (!r.stream) {
      f.fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
    } else {
      Fields sf(*so);
      sf.boolean("include_usage", r.include_usage);
      if (sf.error()) f.fail(sf.error()->message, "stream_options.include_usage");
    }
  }
  if (f.error()) return f.error();
  if (f.get("best_of") && r.best_of < r.n)
    return invalid_request("'best_of' must be at least 'n'", "best_of");
  r.best_of = std::max(r.best_of, r.n);
  if (r.best_of > r.n && r.stream)
    return invalid_request("'best_of' cannot be used with 'stream'", "best_of");
  if (r.echo && r.logprobs)
    return invalid_request(
        "'echo' with 'logprobs' would need the prompt's logprobs, which this server does not "
        "compute",
        "echo");

  if (auto st = Sampler::validate(p); !st) {
    // "invalid sampling parameter NAME: ..." -> param NAME.
    std::string param;
    const std::string& m = st.message();
    constexpr std::string_view kPrefix = "invalid sampling parameter ";
    if (m.rfind(kPrefix, 0) == 0) param = m.substr(kPrefix.size(), m.find(':') - kPrefix.size());
    return invalid_request(m, param);
  }
  return std::nullopt;
}

}  // namespace vela::server
