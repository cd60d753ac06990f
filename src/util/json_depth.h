#pragma once
// How deeply a JSON text nests, measured without parsing it, so that absurdly deep documents
// (request bodies, schemas) are refused before a recursive parser sees them.
// Pure function: safe from any thread.
#include <algorithm>
#include <cstdint>
#include <string_view>

namespace vela {

// Deepest nesting of arrays/objects in `text` (brackets inside strings skipped).
inline int32_t json_nesting_depth(std::string_view text) {
  int32_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace vela
