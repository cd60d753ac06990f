#include "sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace vela {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings)
    : stop_strings_(std::move(stop_strings)) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  if (stop_strings_.empty()) return std::string(text);

  // Everything in `pending_` was unemitted, and it held no complete stop string, so any match
  // found now ends inside `text` and starts within `buffer`.
  std::string buffer = std::move(pending_);
  pending_.clear();
  buffer.append(text);

  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& stop : stop_strings_) {
    // The earliest occurrence of one string is also its earliest-ending one.
    const size_t start = buffer.find(stop);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (best == nullptr || end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      best = &stop;
    }
  }
  if (best != nullptr) {
    stopped_ = true;
    matched_ = *best;
    buffer.resize(best_start);
    return buffer;
  }

  const size_t hold = longest_partial_match(buffer);
  pending_.assign(buffer, buffer.size() - hold, hold);
  buffer.resize(buffer.size() - hold);
  return buffer;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(pending_, std::string());
}

size_t StopMatcher::longest_partial_match(std::string_view text) const {
  size_t longest = 0;
  for (const std::string& stop : stop_strings_) {
    // Only proper prefixes: a whole stop string in `text` would already have matched.
    const size_t max_len = std::min(stop.size() - 1, text.size());
    for (size_t len = max_len; len > longest; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace vela
