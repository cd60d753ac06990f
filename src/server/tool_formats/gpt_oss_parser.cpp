// gpt-oss tool calls in harmony (harmony_parser.h):
//   <|start|>assistant<|channel|>commentary to=functions.NAME
//   <|constrain|>json<|message|>{...}<|call|>
// A message to `functions.NAME` is a call whose body is the JSON arguments, streamed as they
// arrive; the body of any other message (final, a preamble, analysis when no reasoning parser
// took it) and text outside messages is content.
#include "server/tool_formats/harmony_parser.h"
#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

constexpr std::string_view kFunctions = "functions.";

class GptOssParser : public ToolFormatParser {
 private:
  void scan(std::vector<ToolCallDelta>& out, bool at_end) override {
    std::vector<HarmonyEvent> events;
    splitter_.push(buffer_, events);
    buffer_.clear();
    if (at_end) splitter_.finish(events);
    for (const HarmonyEvent& e : events) {
      switch (e.type) {
        case HarmonyEvent::Type::kText:
          emit_content(e.text, out);
          break;
        case HarmonyEvent::Type::kHeader:
          in_call_ = e.recipient.starts_with(kFunctions);
          if (in_call_) {
            begin_call(e.recipient.substr(kFunctions.size()), out);
            args_seen_ = false;
          }
          break;
        case HarmonyEvent::Type::kBody:
          if (!in_call_) {
            emit_content(e.text, out);
            break;
          }
          // Leading whitespace of the arguments is dropped, so an empty body can read as {}.
          if (!args_seen_) {
            const std::string_view t = tool_text::trim(e.text);
            if (t.empty()) break;
            args_seen_ = true;
            emit_arguments(std::string_view(e.text).substr(e.text.find(t.front())), out);
            break;
          }
          emit_arguments(e.text, out);
          break;
        case HarmonyEvent::Type::kEnd:
          if (in_call_) {
            if (!args_seen_) emit_arguments("{}", out);
            end_call();
          }
          in_call_ = false;
          break;
      }
    }
  }

  HarmonySplitter splitter_;
  bool in_call_ = false;
  bool args_seen_ = false;  // in_call_: some non-space text of the arguments came
};

}  // namespace

std::unique_ptr<ToolFormatParser> make_gpt_oss_parser() {
  return std::make_unique<GptOssParser>();
}

}  // namespace vela::server
