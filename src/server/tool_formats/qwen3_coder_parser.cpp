// Qwen3-Coder / Qwen3.5 tool calls:
//   <tool_call>\n<function=NAME>\n<parameter=K>\nVALUE\n</parameter>\n...</function>\n</tool_call>
// One newline after a parameter's opening tag and one before its closing tag belong to the
// format, not the value. The model sometimes leaves out <tool_call> or </parameter>; a value
// then ends at the next parameter or at </function>.
#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

using namespace tool_text;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";

class Qwen3CoderParser : public ToolFormatParser {
 public:
  explicit Qwen3CoderParser(const nlohmann::json& tools) : tools_(tools) {}

 private:
  enum class State { kText, kCall, kFunction, kValue, kAfterFunction };

  void scan(std::vector<ToolCallDelta>& out, bool at_end) override {
    while (true) {
      const std::string_view b = buffer_;
      switch (state_) {
        case State::kText: {
          const Found f = find_first(b, {kCallOpen, kFunctionOpen});
          if (f.pos == npos) {
            const size_t keep = at_end ? 0 : held_suffix(b, {kCallOpen, kFunctionOpen});
            emit_content(b.substr(0, b.size() - keep), out);
            buffer_.erase(0, b.size() - keep);
            return;
          }
          emit_content(b.substr(0, f.pos), out);
          // <function= without <tool_call> is read the same way.
          buffer_.erase(0, f.pos + (f.which == 0 ? kCallOpen.size() : 0));
          state_ = State::kCall;
          continue;
        }
        case State::kCall: {
          const size_t p = skip_space(b);
          const std::string_view t = b.substr(p);
          if (t.starts_with(kFunctionOpen)) {
            const size_t close = t.find('>');
            if (close == npos) {
              if (at_end) return drop_rest();
              return;
            }
            function_ =
                std::string(trim(t.substr(kFunctionOpen.size(), close - kFunctionOpen.size())));
            begin_call(function_, out);
            emit_arguments("{", out);
            n_params_ = 0;
            buffer_.erase(0, p + close + 1);
            state_ = State::kFunction;
            continue;
          }
          if (!at_end && kFunctionOpen.starts_with(t)) return;
          // Not a call after all: what came is content.
          emit_content(std::string(kCallOpen) + std::string(b), out);
          buffer_.clear();
          state_ = State::kText;
          return;
        }
        case State::kFunction: {
          const size_t p = skip_space(b);
          const std::string_view t = b.substr(p);
          if (t.starts_with(kParamOpen)) {
            const size_t close = t.find('>');
            if (close == npos) {
              if (at_end) return close_call(out);
              return;
            }
            const std::string name(trim(t.substr(kParamOpen.size(), close - kParamOpen.size())));
            type_ = parameter_type(tools_, function_, name);
            streamed_ = type_.empty() || is_string_type(type_);  // unknown ones are strings
            emit_arguments((n_params_ > 0 ? ", " : "") + nlohmann::json(name).dump() + ": " +
                               (streamed_ ? "\"" : ""),
                           out);
            ++n_params_;
            value_.clear();
            value_started_ = false;
            buffer_.erase(0, p + close + 1);
            state_ = State::kValue;
            continue;
          }
          if (t.starts_with(kFunctionClose)) {
            buffer_.erase(0, p + kFunctionClose.size());
            close_call(out);
            state_ = State::kAfterFunction;
            continue;
          }
          if (t.starts_with(kCallClose)) {  // </function> left out
            buffer_.erase(0, p + kCallClose.size());
            close_call(out);
            state_ = State::kText;
            continue;
          }
          if (at_end) return close_call(out);
          if (t.empty() || kParamOpen.starts_with(t) || kFunctionClose.starts_with(t) ||
              kCallClose.starts_with(t))
            return;
          // Stray text between parameters: skipped up to the next tag.
          const size_t lt = t.find('<', 1);
          buffer_.erase(0, lt == npos ? b.size() : p + lt);
          continue;
        }
        case State::kValue: {
          // The format's newline right after the opening tag.
          if (!value_started_) {
            if (b.empty()) {
              if (at_end) return close_call(out);
              return;
            }
            if (b[0] == '\n') buffer_.erase(0, 1);
            value_started_ = true;
            continue;
          }
          const Found f = find_first(b, {kParamClose, kParamOpen, kFunctionClose});
          if (f.pos == npos) {
            if (at_end) {
              take_value(b, true, out);
              buffer_.clear();
              state_ = State::kFunction;
              return close_call(out);
            }
            // Hold a possible closing tag and the newline before it.
            size_t keep = held_suffix(b, {kParamClose, kParamOpen, kFunctionClose});
            if (keep < b.size() && b[b.size() - keep - 1] == '\n') ++keep;
            keep += utf8_tail(b.substr(0, b.size() - keep));
            take_value(b.substr(0, b.size() - keep), false, out);
            buffer_.erase(0, b.size() - keep);
            return;
          }
          take_value(b.substr(0, f.pos), true, out);
          buffer_.erase(0, f.pos + (f.which == 0 ? kParamClose.size() : 0));
          state_ = State::kFunction;
          continue;
        }
        case State::kAfterFunction: {
          const size_t p = skip_space(b);
          const std::string_view t = b.substr(p);
          if (t.starts_with(kCallClose)) {
            buffer_.erase(0, p + kCallClose.size());
            state_ = State::kText;
            continue;
          }
          if (!at_end && kCallClose.starts_with(t)) return;
          state_ = State::kText;
          continue;
        }
      }
    }
  }

  // A value's text; `last` drops the format's newline before the closing tag.
  void take_value(std::string_view text, bool last, std::vector<ToolCallDelta>& out) {
    if (last && !text.empty() && text.back() == '\n') text.remove_suffix(1);
    if (streamed_) {
      emit_arguments(json_string_body(text), out);
      if (last) emit_arguments("\"", out);
      return;
    }
    value_ += text;
    if (last) emit_arguments(typed_value_json(value_, type_, false), out);
  }

  void close_call(std::vector<ToolCallDelta>& out) {
    if (state_ == State::kValue) take_value("", true, out);
    emit_arguments("}", out);
    end_call();
    state_ = State::kAfterFunction;
  }

  void drop_rest() {
    buffer_.clear();
    state_ = State::kText;
  }

  nlohmann::json tools_;
  State state_ = State::kText;
  std::string function_;
  std::string type_;
  bool streamed_ = false;       // a string value: escaped and sent as it comes
  bool value_started_ = false;  // the newline after the opening tag was looked at
  std::string value_;           // a value of another type, until it is complete
  int n_params_ = 0;
};

}  // namespace

std::unique_ptr<ToolFormatParser> make_qwen3_coder_parser(const nlohmann::json& tools) {
  return std::make_unique<Qwen3CoderParser>(tools);
}

}  // namespace vela::server
