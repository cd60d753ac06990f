#include "server/reasoning/reasoning_parser.h"

namespace vela::server {

namespace {

struct FormatName {
  ReasoningFormat format;
  const char* name;
};
constexpr FormatName kNames[] = {
    {ReasoningFormat::kNone, "none"},      {ReasoningFormat::kDeepSeekR1, "deepseek_r1"},
    {ReasoningFormat::kQwen3, "qwen3"},    {ReasoningFormat::kGlm45, "glm45"},
    {ReasoningFormat::kGptOss, "gpt_oss"},
};

}  // namespace

const char* reasoning_format_name(ReasoningFormat format) {
  for (const FormatName& f : kNames)
    if (f.format == format) return f.name;
  return "?";
}

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  for (const FormatName& f : kNames)
    if (name == f.name) return f.format;
  return std::nullopt;
}

std::string reasoning_format_list() {
  std::string out;
  for (const FormatName& f : kNames) {
    if (!out.empty()) out += ", ";
    out += f.name;
  }
  return out;
}

ReasoningFormat detect_reasoning_format(std::string_view source, std::string& why) {
  const auto has = [source](std::string_view s) {
    return source.find(s) != std::string_view::npos;
  };
  if (has("<|channel|>")) {
    why = "the chat template writes harmony's <|channel|> messages (gpt-oss)";
    return ReasoningFormat::kGptOss;
  }
  if (!has("<think>") && !has("</think>")) {
    why = "the chat template writes no <think> block";
    return ReasoningFormat::kNone;
  }
  if (has("<｜Assistant｜>") || has("<｜tool▁calls▁begin｜>")) {
    why = "the chat template writes <think> after DeepSeek's <｜Assistant｜>";
    return ReasoningFormat::kDeepSeekR1;
  }
  if (has("[gMASK]") || has("<arg_key>")) {
    why = "the chat template writes <think> in GLM's format";
    return ReasoningFormat::kGlm45;
  }
  why = "the chat template writes <think> blocks";
  return ReasoningFormat::kQwen3;
}

reasoning::ThinkingMarkers reasoning_markers(ReasoningFormat format) {
  if (format == ReasoningFormat::kGptOss)
    return reasoning::ThinkingMarkers{"<|channel|>analysis<|message|>", "<|end|>"};
  return reasoning::ThinkingMarkers{"<think>", "</think>",
                                    /*implicit_start=*/format == ReasoningFormat::kDeepSeekR1};
}

ReasoningStream::ReasoningStream(ReasoningFormat format, reasoning::Phase initial)
    : splitter_(reasoning_markers(format), initial), harmony_(format == ReasoningFormat::kGptOss) {}

ReasoningStream::Split ReasoningStream::push(std::string_view text) {
  Split s;
  if (!harmony_) {
    splitter_.push(text, s.reasoning, s.content);
    return s;
  }
  std::vector<HarmonyEvent> events;
  harmony_splitter_.push(text, events);
  take(events, s);
  return s;
}

ReasoningStream::Split ReasoningStream::finish() {
  Split s;
  if (!harmony_) {
    splitter_.finish(s.reasoning, s.content);
    return s;
  }
  std::vector<HarmonyEvent> events;
  harmony_splitter_.finish(events);
  take(events, s);
  return s;
}

void ReasoningStream::take(const std::vector<HarmonyEvent>& events, Split& s) {
  for (const HarmonyEvent& e : events) {
    switch (e.type) {
      case HarmonyEvent::Type::kText:
        s.content += e.text;
        break;
      case HarmonyEvent::Type::kHeader:
        if (!e.recipient.empty()) {
          target_ = Target::kRaw;
          s.content +=
              "<|start|>assistant<|channel|>" + e.channel + " to=" + e.recipient + "<|message|>";
        } else {
          target_ = e.channel == "analysis" ? Target::kReasoning : Target::kContent;
        }
        break;
      case HarmonyEvent::Type::kBody:
        (target_ == Target::kReasoning ? s.reasoning : s.content) += e.text;
        break;
      case HarmonyEvent::Type::kEnd:
        if (target_ == Target::kRaw) s.content += e.text;
        target_ = Target::kContent;
        break;
    }
  }
}

}  // namespace vela::server
