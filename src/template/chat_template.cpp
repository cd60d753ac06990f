#include "template/chat_template.h"

#include <ctime>
#include <new>

#include "template/ast.h"
#include "template/interpreter.h"
#include "template/parser.h"

namespace vela {

namespace {

jinja::Value from_json(jinja::Heap& heap, const nlohmann::ordered_json& j, int depth) {
  using jinja::Value;
  if (depth > jinja::kMaxValueDepth) jinja::fail("context JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      jinja::ListObj* l = heap.new_list();
      heap.charge(j.size());
      l->items.reserve(j.size());
      for (const auto& item : j) l->items.push_back(from_json(heap, item, depth + 1));
      return Value::list(l);
    }
    case nlohmann::json::value_t::object: {
      jinja::DictObj* d = heap.new_dict();
      heap.charge(j.size() * jinja::kDictEntryCost);
      for (const auto& [k, v] : j.items()) d->set(Value::string(k), from_json(heap, v, depth + 1));
      return Value::dict(d);
    }
    default:
      jinja::fail("context JSON holds a value templates cannot use (binary data)");
  }
}

std::tm local_time(const ChatTemplateOptions& options) {
  const auto tp = options.now.value_or(std::chrono::system_clock::now());
  const std::time_t t = std::chrono::system_clock::to_time_t(tp);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  try {
    auto tree = std::make_shared<jinja::Template>(jinja::parse_template(source));
    ChatTemplate t;
    t.tree_ = std::move(tree);
    t.source_ = std::make_shared<const std::string>(source);
    return t;
  } catch (const jinja::RenderError& e) {
    return make_error(e.message);
  } catch (const std::bad_alloc&) {
    return make_error("chat template too large (out of memory while parsing)");
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context,
                                         const ChatTemplateOptions& options) const {
  if (!tree_) return make_error("chat template was not parsed");
  if (!context.is_object() && !context.is_null()) {
    return make_error("chat template context must be a JSON object");
  }
  jinja::Limits limits;
  limits.max_output_bytes = options.max_output_bytes;
  limits.max_steps = options.max_steps;
  limits.max_depth = options.max_depth;
  limits.max_items = options.max_items;
  jinja::Interpreter interpreter(limits, local_time(options));
  try {
    const jinja::Value ctx =
        context.is_null() ? jinja::Value::none() : from_json(interpreter.heap(), context, 0);
    return interpreter.render(*tree_, ctx);
  } catch (const jinja::RenderError& e) {
    if (e.raised_by_template) return make_error(e.message);
    return make_error("chat template error (line " + std::to_string(interpreter.line()) +
                      "): " + e.message);
  } catch (const std::bad_alloc&) {
    return make_error("chat template error: out of memory");
  } catch (const std::exception& e) {
    return make_error(std::string("chat template error: ") + e.what());
  }
}

Result<std::string> render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, std::string_view bos_token,
                                std::string_view eos_token, const nlohmann::ordered_json& extra,
                                const ChatTemplateOptions& options) {
  if (!extra.is_null() && !extra.is_object()) {
    return make_error("chat template extra variables must be a JSON object");
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = std::string(bos_token);
  context["eos_token"] = std::string(eos_token);
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) context[k] = v;
  }
  return tmpl.render(context, options);
}

}  // namespace vela
