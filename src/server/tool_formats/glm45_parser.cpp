// GLM-4.5 / 4.6 / 4.7 tool calls:
//   <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
// Values of string parameters are the text as written; others are JSON when they parse (the
// template writes non-strings with tojson).
#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

using namespace tool_text;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";

class Glm45Parser : public ToolFormatParser {
 public:
  explicit Glm45Parser(const nlohmann::json& tools) : tools_(tools) {}

 private:
  enum class State { kText, kName, kArgs, kKey, kBeforeValue, kValue };

  void scan(std::vector<ToolCallDelta>& out, bool at_end) override {
    while (true) {
      const std::string_view b = buffer_;
      switch (state_) {
        case State::kText: {
          const size_t at = b.find(kCallOpen);
          if (at == npos) {
            const size_t keep = at_end ? 0 : held_suffix(b, {kCallOpen});
            emit_content(b.substr(0, b.size() - keep), out);
            buffer_.erase(0, b.size() - keep);
            return;
          }
          emit_content(b.substr(0, at), out);
          buffer_.erase(0, at + kCallOpen.size());
          state_ = State::kName;
          continue;
        }
        case State::kName: {
          const Found f = find_first(b, {"\n", kKeyOpen, kCallClose});
          if (f.pos == npos && !at_end) return;
          const size_t end = f.pos == npos ? b.size() : f.pos;
          function_ = std::string(trim(b.substr(0, end)));
          begin_call(function_, out);
          emit_arguments("{", out);
          n_args_ = 0;
          buffer_.erase(0, f.which == 0 && f.pos != npos ? end + 1 : end);
          state_ = State::kArgs;
          if (at_end && f.pos == npos) return close_call(out);
          continue;
        }
        case State::kArgs: {
          const size_t p = skip_space(b);
          const std::string_view t = b.substr(p);
          if (t.starts_with(kKeyOpen)) {
            buffer_.erase(0, p + kKeyOpen.size());
            state_ = State::kKey;
            continue;
          }
          if (t.starts_with(kCallClose)) {
            buffer_.erase(0, p + kCallClose.size());
            close_call(out);
            continue;
          }
          if (at_end) return close_call(out);
          if (t.empty() || kKeyOpen.starts_with(t) || kCallClose.starts_with(t)) return;
          const size_t lt = t.find('<', 1);  // stray text: skipped
          buffer_.erase(0, lt == npos ? b.size() : p + lt);
          continue;
        }
        case State::kKey: {
          const size_t at = b.find(kKeyClose);
          if (at == npos) {
            if (at_end) return close_call(out);
            return;
          }
          const std::string key(trim(b.substr(0, at)));
          type_ = parameter_type(tools_, function_, key);
          streamed_ = is_string_type(type_);
          emit_arguments((n_args_ > 0 ? ", " : "") + nlohmann::json(key).dump() + ": " +
                             (streamed_ ? "\"" : ""),
                         out);
          ++n_args_;
          value_.clear();
          buffer_.erase(0, at + kKeyClose.size());
          state_ = State::kBeforeValue;
          continue;
        }
        case State::kBeforeValue: {
          const size_t p = skip_space(b);
          const std::string_view t = b.substr(p);
          if (t.starts_with(kValueOpen)) {
            buffer_.erase(0, p + kValueOpen.size());
            state_ = State::kValue;
            continue;
          }
          if (!at_end && kValueOpen.starts_with(t)) return;
          // A key without a value: an empty one.
          state_ = State::kValue;
          take_value("", true, out);
          state_ = State::kArgs;
          continue;
        }
        case State::kValue: {
          const size_t at = b.find(kValueClose);
          if (at == npos) {
            size_t keep = at_end ? 0 : held_suffix(b, {kValueClose});
            if (!at_end) keep += utf8_tail(b.substr(0, b.size() - keep));
            take_value(b.substr(0, b.size() - keep), at_end, out);
            buffer_.erase(0, b.size() - keep);
            if (at_end) {
              state_ = State::kArgs;
              return close_call(out);
            }
            return;
          }
          take_value(b.substr(0, at), true, out);
          buffer_.erase(0, at + kValueClose.size());
          state_ = State::kArgs;
          continue;
        }
      }
    }
  }

  void take_value(std::string_view text, bool last, std::vector<ToolCallDelta>& out) {
    if (streamed_) {
      emit_arguments(json_string_body(text), out);
      if (last) emit_arguments("\"", out);
      return;
    }
    value_ += text;
    if (last) emit_arguments(typed_value_json(value_, type_, true), out);
  }

  void close_call(std::vector<ToolCallDelta>& out) {
    emit_arguments("}", out);
    end_call();
    state_ = State::kText;
  }

  nlohmann::json tools_;
  State state_ = State::kText;
  std::string function_;
  std::string type_;
  bool streamed_ = false;
  std::string value_;
  int n_args_ = 0;
};

}  // namespace

std::unique_ptr<ToolFormatParser> make_glm45_parser(const nlohmann::json& tools) {
  return std::make_unique<Glm45Parser>(tools);
}

}  // namespace vela::server
