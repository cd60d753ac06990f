#pragma once
// Incremental stop-string matching over streamed, decoded text.
// Text that could still turn out to be the start of a stop string is held back until it either
// completes a stop string (then it is dropped, with everything after it) or can no longer match
// (then it is released). Matching is on bytes, which is exact for UTF-8: a valid multi-byte stop
// string can only match at character boundaries.
// When several stop strings match, the one that completes first in the stream wins (what a
// token-by-token check would see, independent of how the text was split into pushes); among
// those completing at the same byte, the one starting earliest (the longest) wins.
// Thread-safety: not thread-safe (one per request).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vela {

class StopMatcher {
 public:
  // Empty strings in stop_strings are ignored (SamplingParams validation rejects them).
  explicit StopMatcher(std::vector<std::string> stop_strings);

  // Feeds newly decoded text; returns the text that is safe to emit now. When a stop string
  // completes, stopped() becomes true and the returned text ends right before it; after that
  // every push returns "".
  std::string push(std::string_view text);

  // At the end of generation: returns the held-back text ("" if stopped).
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched; empty until stopped().
  const std::string& matched() const { return matched_; }
  // Bytes currently held back (a possible stop-string prefix).
  size_t held_back() const { return pending_.size(); }

 private:
  // Length of the longest suffix of `text` that is a proper prefix of some stop string.
  size_t longest_partial_match(std::string_view text) const;

  std::vector<std::string> stop_strings_;
  std::string pending_;  // held-back text, always shorter than the longest stop string
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace vela
