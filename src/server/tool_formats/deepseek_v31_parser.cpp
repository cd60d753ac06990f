// DeepSeek-V3.1 tool calls:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
//   <｜tool▁calls▁end｜>
// The arguments are JSON text and stream as they come.
#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

using namespace tool_text;

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

class DeepSeekV31Parser : public ToolFormatParser {
 private:
  enum class State { kText, kCalls, kName, kArgs };

  void scan(std::vector<ToolCallDelta>& out, bool at_end) override {
    while (true) {
      const std::string_view b = buffer_;
      switch (state_) {
        case State::kText: {
          const Found f = find_first(b, {kCallsBegin, kCallBegin});
          if (f.pos == npos) {
            const size_t keep = at_end ? 0 : held_suffix(b, {kCallsBegin, kCallBegin});
            emit_content(b.substr(0, b.size() - keep), out);
            buffer_.erase(0, b.size() - keep);
            return;
          }
          emit_content(b.substr(0, f.pos), out);
          buffer_.erase(0, f.pos + (f.which == 0 ? kCallsBegin.size() : 0));
          state_ = State::kCalls;
          continue;
        }
        case State::kCalls: {
          const size_t p = skip_space(b);
          const std::string_view t = b.substr(p);
          if (t.starts_with(kCallBegin)) {
            buffer_.erase(0, p + kCallBegin.size());
            state_ = State::kName;
            continue;
          }
          if (t.starts_with(kCallsEnd)) {
            buffer_.erase(0, p + kCallsEnd.size());
            state_ = State::kText;
            continue;
          }
          if (!at_end && (kCallBegin.starts_with(t) || kCallsEnd.starts_with(t))) return;
          state_ = State::kText;
          continue;
        }
        case State::kName: {
          const size_t at = b.find(kSep);
          if (at == npos) {
            if (at_end) buffer_.clear();  // cut off before the arguments: no call
            return;
          }
          begin_call(std::string(trim(b.substr(0, at))), out);
          args_sent_ = 0;
          buffer_.erase(0, at + kSep.size());
          state_ = State::kArgs;
          continue;
        }
        case State::kArgs: {
          const size_t at = b.find(kCallEnd);
          if (at == npos) {
            const size_t keep = at_end ? 0 : held_suffix(b, {kCallEnd});
            send(b.substr(0, b.size() - keep), out);
            buffer_.erase(0, b.size() - keep);
            if (at_end) close_call(out);
            return;
          }
          send(b.substr(0, at), out);
          buffer_.erase(0, at + kCallEnd.size());
          close_call(out);
          continue;
        }
      }
    }
  }

  void send(std::string_view text, std::vector<ToolCallDelta>& out) {
    if (args_sent_ == 0) text.remove_prefix(skip_space(text));  // before the object
    emit_arguments(text, out);
    args_sent_ += text.size();
  }

  void close_call(std::vector<ToolCallDelta>& out) {
    if (args_sent_ == 0) emit_arguments("{}", out);
    end_call();
    state_ = State::kCalls;
  }

  State state_ = State::kText;
  size_t args_sent_ = 0;
};

}  // namespace

std::unique_ptr<ToolFormatParser> make_deepseek_v31_parser() {
  return std::make_unique<DeepSeekV31Parser>();
}

}  // namespace vela::server
