#include "server/chat_formatter.h"

#include "template/chat_template.h"

namespace vela::server {

// The Jinja engine: the template is parsed once; each request renders its messages.
struct ChatFormatter::Impl {
  ChatTemplate tmpl;
  std::string bos_token;
  std::string eos_token;
};

Result<ChatFormatter> ChatFormatter::create(const std::string& source, std::string bos_token,
                                            std::string eos_token) {
  auto parsed = ChatTemplate::parse(source);
  if (!parsed) return parsed.error();
  return ChatFormatter(
      std::make_shared<Impl>(Impl{std::move(*parsed), std::move(bos_token), std::move(eos_token)}));
}

Result<std::string> ChatFormatter::render(const nlohmann::json& messages,
                                          bool add_generation_prompt,
                                          const nlohmann::ordered_json& tools,
                                          const nlohmann::json& kwargs) const {
  if (!messages.is_array()) return make_error("messages must be an array");
  // Templates see each message's keys in the order clients write them: role, then content.
  nlohmann::ordered_json ordered = nlohmann::ordered_json::array();
  for (const nlohmann::json& m : messages) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const char* key : {"role", "content"})
      if (auto it = m.find(key); it != m.end()) o[key] = *it;
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content") o[key] = value;
    ordered.push_back(std::move(o));
  }
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (kwargs.is_object())
    for (const auto& [key, value] : kwargs.items())
      extra[key] = nlohmann::ordered_json::parse(value.dump());
  if (!tools.is_null()) extra["tools"] = tools;
  return render_chat(impl_->tmpl, ordered, add_generation_prompt, impl_->bos_token,
                     impl_->eos_token, extra);
}

const std::string& ChatFormatter::source() const {
  return impl_->tmpl.source();
}

const char* ChatFormatter::engine_name() {
  return "Jinja engine";
}

}  // namespace vela::server
