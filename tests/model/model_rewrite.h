#pragma once
// Test helper: a copy of a GGUF model with metadata changed or tensors dropped, for bad-file
// tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace vela::test {

// A copy of a shared model with metadata changed: the same tensors, other keys.
inline std::vector<uint8_t> rewrite_model(
    const GgufFile& src, const std::vector<std::pair<std::string, int64_t>>& set_u32,
    const std::vector<std::string>& drop = {}) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    bool skip = std::find(drop.begin(), drop.end(), std::string(key)) != drop.end();
    for (const auto& s : set_u32) skip |= s.first == key;
    if (!skip) w.add_value(key, value);
  }
  for (const auto& [key, value] : set_u32) w.add_u32(key, uint32_t(value));
  for (const GgufTensorInfo& t : src.tensors()) {
    if (std::find(drop.begin(), drop.end(), std::string(t.name)) != drop.end()) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type(), ne, {t.data, t.data + t.n_bytes}).ok());
  }
  return w.to_bytes();
}

}  // namespace vela::test
