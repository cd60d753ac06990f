#pragma once
// Chat messages -> prompt text, by a model's chat template (GGUF `tokenizer.chat_template`, or
// a file given with --chat-template), rendered by the Jinja engine (src/template).
// Thread-safety: immutable after create(); render() is const and safe to call concurrently.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace vela::server {

class ChatFormatter {
 public:
  // Parses the template once; an error says what it could not handle.
  static Result<ChatFormatter> create(const std::string& source, std::string bos_token,
                                      std::string eos_token);

  // messages: [{"role": string, "content": string}, ...] (the request parser has already
  // flattened content parts to strings). Template errors (e.g. raise_exception for roles
  // that do not alternate) come back as errors.
  // tools: the request's `tools` array (null when none), passed to the template as `tools` in
  // its key order.
  // kwargs: more template variables (chat_template_kwargs: enable_thinking, ...).
  Result<std::string> render(const nlohmann::json& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& tools = nullptr,
                             const nlohmann::json& kwargs = nullptr) const;
  // The template's text (to recognise the model's tool-call syntax).
  const std::string& source() const;

  // Which renderer backs this build, for the startup log.
  static const char* engine_name();

 private:
  struct Impl;
  explicit ChatFormatter(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace vela::server
