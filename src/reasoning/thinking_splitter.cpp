#include "reasoning/thinking_splitter.h"

#include <algorithm>
#include <cctype>

namespace vela::reasoning {

namespace {

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

size_t first_non_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Longest suffix of `s` that is a proper prefix of `marker` (text to hold back).
size_t partial_marker(std::string_view s, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (marker.substr(0, n) == s.substr(s.size() - n)) return n;
  return 0;
}

}  // namespace

Phase initial_phase(const ThinkingMarkers& markers, std::string_view prompt) {
  while (!prompt.empty() && is_space(prompt.back())) prompt.remove_suffix(1);
  if (!markers.start.empty() && prompt.ends_with(markers.start)) return Phase::kThinking;
  if (!markers.end.empty() && prompt.ends_with(markers.end)) return Phase::kAnswer;
  return markers.implicit_start ? Phase::kThinking : Phase::kBefore;
}

ThinkingSplitter::ThinkingSplitter(ThinkingMarkers markers, Phase initial)
    : markers_(std::move(markers)), phase_(initial), skip_start_(initial == Phase::kThinking) {}

void ThinkingSplitter::push(std::string_view text, std::string& reasoning, std::string& content) {
  held_.append(text);
  scan(reasoning, content, false);
}

void ThinkingSplitter::finish(std::string& reasoning, std::string& content) {
  scan(reasoning, content, true);
}

void ThinkingSplitter::scan(std::string& reasoning, std::string& content, bool at_end) {
  const std::string_view start = markers_.start;
  const std::string_view end = markers_.end;
  while (true) {
    switch (phase_) {
      case Phase::kBefore: {
        const size_t ws = first_non_space(held_);
        const std::string_view t = std::string_view(held_).substr(ws);
        if (t.empty()) {
          if (at_end) {
            content += held_;
            held_.clear();
          }
          return;
        }
        if (!start.empty() && t.starts_with(start)) {
          held_.erase(0, ws + start.size());
          phase_ = Phase::kThinking;
          continue;
        }
        if (!at_end && start.starts_with(t)) return;  // may still become the marker
        phase_ = markers_.implicit_start ? Phase::kThinking : Phase::kAnswer;
        answer_start_ = false;  // no block: the answer is the output as written
        continue;
      }
      case Phase::kThinking: {
        if (skip_start_ && !start.empty()) {
          const size_t ws = first_non_space(held_);
          const std::string_view t = std::string_view(held_).substr(ws);
          if (!at_end && (t.empty() || (t.size() < start.size() && start.starts_with(t)))) return;
          if (t.starts_with(start)) held_.erase(0, ws + start.size());
          skip_start_ = false;
        }
        const size_t at = end.empty() ? std::string::npos : held_.find(end);
        if (at != std::string::npos) {
          reasoning.append(held_, 0, at);
          held_.erase(0, at + end.size());
          phase_ = Phase::kAnswer;
          answer_start_ = true;
          continue;
        }
        const size_t keep = at_end ? 0 : partial_marker(held_, end);
        reasoning.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case Phase::kAnswer: {
        if (answer_start_) {
          const size_t ws = first_non_space(held_);
          held_.erase(0, ws);
          if (held_.empty()) return;
          answer_start_ = false;
        }
        content += held_;
        held_.clear();
        return;
      }
    }
  }
}

}  // namespace vela::reasoning
