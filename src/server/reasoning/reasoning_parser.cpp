#include "server/reasoning/reasoning_parser.h"

namespace vela::server {

namespace {

struct FormatName {
  ReasoningFormat format;
  const char* name;
};
constexpr FormatName kNames[] = {
    {ReasoningFormat::kNone, "none"},
    {ReasoningFormat::kDeepSeekR1, "deepseek_r1"},
    {ReasoningFormat::kQwen3, "qwen3"},
    {ReasoningFormat::kGlm45, "glm45"},
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
  return reasoning::ThinkingMarkers{"<think>", "</think>",
                                    /*implicit_start=*/format == ReasoningFormat::kDeepSeekR1};
}

}  // namespace vela::server
