#pragma once
// `vela serve --reasoning-parser`: which reasoning format a model writes, read off its chat
// template for `auto`, and the per-choice stream that splits its output into
// message.reasoning_content and message.content (src/reasoning does the splitting).
// Free functions and a per-choice stream; the stream is not thread-safe (one per choice).
#include <optional>
#include <string>
#include <string_view>

#include "reasoning/thinking_splitter.h"
#include "server/tool_formats/harmony_parser.h"

namespace vela::server {

// deepseek_r1: `<think>`...`</think>`, the start marker optional (the output is reasoning up
// to `</think>`); qwen3 and glm45: a block only when the output (or the prompt's end) opens it.
// gpt_oss: harmony's analysis messages (harmony_parser.h).
enum class ReasoningFormat { kNone, kDeepSeekR1, kQwen3, kGlm45, kGptOss };

const char* reasoning_format_name(ReasoningFormat format);
// A name other than "auto"; none when unknown.
std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name);
// Every name, comma-separated, for messages ("auto" not included).
std::string reasoning_format_list();

// `auto`: the format the template's markers point to; `why` says what decided.
ReasoningFormat detect_reasoning_format(std::string_view chat_template_source, std::string& why);

// The markers of a format other than kNone (kGptOss: the analysis header and `<|end|>`, for the
// engine's reasoning control; its stream splits by harmony's messages).
reasoning::ThinkingMarkers reasoning_markers(ReasoningFormat format);

// One choice's output, split as it arrives. gpt_oss: analysis bodies are reasoning; final
// bodies, preambles and text outside messages are content; a message to a recipient (a tool
// call) goes to content as harmony text, for the tool-call parser.
class ReasoningStream {
 public:
  ReasoningStream(ReasoningFormat format, reasoning::Phase initial);

  struct Split {
    std::string reasoning, content;
  };
  Split push(std::string_view text);
  Split finish();

 private:
  void take(const std::vector<HarmonyEvent>& events, Split& s);

  reasoning::ThinkingSplitter splitter_;
  bool harmony_;
  HarmonySplitter harmony_splitter_;
  enum class Target { kContent, kReasoning, kRaw } target_ = Target::kContent;  // harmony_
};

}  // namespace vela::server
