#pragma once
// Chat templates: the Jinja2 templates that models ship (GGUF `tokenizer.chat_template`,
// Hugging Face `chat_template`) to turn a list of messages into the prompt text.
// Rendering matches Python Jinja2 as model hubs configure it (trim_blocks, lstrip_blocks,
// sandboxed, loop controls, `raise_exception(msg)`, `strftime_now(fmt)`, a `tojson` that keeps
// key order and non-ASCII text, like Hugging Face's): the same template and messages give the
// same bytes.
// Untrusted templates are safe to render: every failure (syntax, undefined use, type errors,
// raise_exception, resource limits) is a Result error, never a crash or an exception.
//
// Differences from Jinja2 a template could observe: map/select/reverse/items() return lists
// rather than generators or views; list/dict mutators (append, update, ...) are allowed;
// Unicode case mapping covers Latin, Greek, Cyrillic, Armenian and Georgian; `groupby`,
// `slice`, `random`, `urlize`, `wordwrap`, `include`/`import`/`extends` are not provided.
//
// Thread-safety: a ChatTemplate is immutable after parse(); render() is const and may be
// called from several threads at once. Copies share the parsed tree.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace vela {

namespace jinja {
struct Template;
}

struct ChatTemplateOptions {
  // The clock strftime_now() reads (local time); unset means now.
  std::optional<std::chrono::system_clock::time_point> now;
  // Largest output (and largest string a template may build).
  size_t max_output_bytes = 32u << 20;
  // Work budget: evaluated nodes plus loop iterations.
  uint64_t max_steps = 50'000'000;
  // Nesting of statements, expressions and macro calls at render time.
  int max_depth = 500;
  // List/dict elements and objects a render may create.
  size_t max_items = 10'000'000;
};

class ChatTemplate {
 public:
  // Parses the template; a syntax error says "syntax error (line N): ...".
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders with `context` (a JSON object: its members are the template's variables).
  // A template's raise_exception(msg) gives an error whose message is exactly msg; other
  // errors read "chat template error (line N): ...".
  Result<std::string> render(const nlohmann::ordered_json& context,
                             const ChatTemplateOptions& options = {}) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const jinja::Template> tree_;
  std::shared_ptr<const std::string> source_;
};

// Renders a conversation the way chat servers call templates: sets `messages`,
// `add_generation_prompt`, `bos_token` and `eos_token`, plus the members of `extra` (for
// example "tools", "documents", or template-specific flags), which win over the four above.
Result<std::string> render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, std::string_view bos_token,
                                std::string_view eos_token,
                                const nlohmann::ordered_json& extra = nlohmann::ordered_json(),
                                const ChatTemplateOptions& options = {});

}  // namespace vela
