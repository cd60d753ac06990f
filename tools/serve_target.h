#pragma once
// The server a `vela bench serve` run drives: host, port and path prefix from an http:// URL.
// A plain value type; no thread-safety concerns.
#include <string>

#include "util/result.h"

namespace vela::cli {

struct Target {
  std::string host, port, path_prefix;
};

// http://host[:port][/prefix]
Result<Target> parse_url(const std::string& url);

}  // namespace vela::cli
