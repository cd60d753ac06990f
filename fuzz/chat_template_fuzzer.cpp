// libFuzzer target: a hostile chat template (the text before the first NUL byte) rendered over a
// conversation whose last user message is the text after it. The render limits are small so a
// template that loops or builds huge strings ends in an error quickly, as the server's would.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);
  const std::string_view content =
      split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  auto parsed = vela::ChatTemplate::parse(source);
  if (!parsed.ok()) return 0;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "You are terse."}});
  messages.push_back({{"role", "user"}, {"content", "Hi"}});
  messages.push_back({{"role", "assistant"}, {"content", "Hello."}});
  // Content bytes may be invalid UTF-8, as a client's could be after the JSON layer replaced
  // nothing; the template engine must cope either way.
  messages.push_back({{"role", "user"}, {"content", std::string(content)}});
  nlohmann::ordered_json extra;
  extra["tools"] = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  vela::ChatTemplateOptions options;
  options.max_steps = 200'000;
  options.max_output_bytes = 1u << 20;
  options.max_items = 100'000;
  (void)vela::render_chat(parsed.value(), messages, true, "<s>", "</s>", extra, options);
  return 0;
}
