// Mistral's tool calls since the v11 tokenizer (Mistral Small 3.2, Ministral 3):
//   [TOOL_CALLS]NAME[ARGS]{...}[TOOL_CALLS]NAME[ARGS]{...}
// (some versions put [CALL_ID]ID between the name and [ARGS]). The arguments are one JSON
// object and stream as they come; it ends where its braces balance.
#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

using namespace tool_text;

constexpr std::string_view kCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

class MistralNamedParser : public ToolFormatParser {
 private:
  enum class State { kText, kName, kArgs };

  void scan(std::vector<ToolCallDelta>& out, bool at_end) override {
    while (true) {
      const std::string_view b = buffer_;
      switch (state_) {
        case State::kText: {
          const size_t at = b.find(kCalls);
          if (at == npos) {
            const size_t keep = at_end ? 0 : held_suffix(b, {kCalls});
            emit_content(b.substr(0, b.size() - keep), out);
            buffer_.erase(0, b.size() - keep);
            return;
          }
          emit_content(b.substr(0, at), out);
          buffer_.erase(0, at + kCalls.size());
          state_ = State::kName;
          continue;
        }
        case State::kName: {
          const size_t at = b.find(kArgs);
          if (at == npos) {
            if (at_end) buffer_.clear();  // cut off before the arguments: no call
            return;
          }
          std::string_view name = b.substr(0, at);
          if (const size_t id = name.find(kCallId); id != npos) name = name.substr(0, id);
          begin_call(std::string(trim(name)), out);
          depth_ = 0;
          in_string_ = escaped_ = started_ = false;
          buffer_.erase(0, at + kArgs.size());
          state_ = State::kArgs;
          continue;
        }
        case State::kArgs: {
          size_t i = started_ ? 0 : skip_space(b);
          const size_t from = i;
          bool done = false;
          for (; i < b.size() && !done; ++i) {
            const char c = b[i];
            started_ = true;
            if (in_string_) {
              if (escaped_)
                escaped_ = false;
              else if (c == '\\')
                escaped_ = true;
              else if (c == '"')
                in_string_ = false;
            } else if (c == '"') {
              in_string_ = true;
            } else if (c == '{' || c == '[') {
              ++depth_;
            } else if (c == '}' || c == ']') {
              done = --depth_ <= 0;
            }
          }
          emit_arguments(b.substr(from, i - from), out);
          buffer_.erase(0, i);
          if (done || at_end) {
            if (!started_) emit_arguments("{}", out);
            end_call();
            state_ = State::kText;
            if (done) continue;
          }
          return;
        }
      }
    }
  }

  State state_ = State::kText;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false, started_ = false;
};

}  // namespace

std::unique_ptr<ToolFormatParser> make_mistral_named_parser() {
  return std::make_unique<MistralNamedParser>();
}

}  // namespace vela::server
