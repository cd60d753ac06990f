#pragma once
// API-key checks for `Authorization: Bearer <key>` (and Anthropic's `x-api-key: <key>`). Keys
// are compared in constant time (per candidate key, independent of where the first difference
// is) so response timing does not reveal a key's prefix.
// Thread-safety: immutable after construction; check() is const and safe from any thread.
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace vela::server {

// True when a and b are equal; the time taken depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// Reads keys from a file: one per line; blank lines and lines starting with '#' are skipped,
// surrounding whitespace is trimmed. An unreadable file or one without keys is an error.
Result<std::vector<std::string>> read_api_key_file(const std::string& path);

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {}

  bool enabled() const { return !keys_.empty(); }
  // `authorization` is the header value ("" when absent). True when auth is disabled or the
  // header carries one of the keys as a Bearer token.
  bool check(std::string_view authorization) const;
  // `key` is a bare key (an `x-api-key` header's value): true when auth is disabled or it is
  // one of the keys.
  bool check_key(std::string_view key) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace vela::server
