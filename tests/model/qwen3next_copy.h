#pragma once
// Test helper: tiny-qwen35moe-F32 rewritten as a `qwen3next` file, the layout Qwen3-Next's
// converter writes (reference engine: its qwen3next graph). Its Gated DeltaNet projections are
// fused per key head (ssm_in: q, k, then the v and the z rows of the r value heads reading that
// key head; ssm_ba: their beta rows, then alpha rows) and its value heads are in the grouped order
// (value head kh * r + j reads key head kh), where qwen35's converter wrote them tiled (value head
// j * n_k + kh reads key head kh). The time-step bias is written as `ssm_dt` (the name without
// `.bias` that some converters use). The copy computes what the original computes: its
// attention layers, whose positions make qwen35's RoPE sections one NeoX rotation, and its FFN
// are the same tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/shared_data.h"

namespace vela::test {

// The qwen3next copy of `src` (a qwen35moe F32 file) as a GGUF image.
inline std::vector<uint8_t> qwen3next_copy(const GgufFile& src) {
  const std::string from = "qwen35moe.", to = "qwen3next.";
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    std::string name(key);
    if (name == "general.architecture") {
      w.add_string(name, "qwen3next");
      continue;
    }
    if (name == from + "rope.dimension_sections") continue;
    if (name.starts_with(from)) name = to + name.substr(from.size());
    w.add_value(name, value);
  }
  const auto u32 = [&](const std::string& key) -> int64_t {
    auto v = src.get_int(from + key);
    EXPECT_TRUE(v.ok() && v->has_value()) << key;
    return v.ok() && v->has_value() ? **v : 1;
  };
  const int64_t n_k = u32("ssm.group_count"), n_v = u32("ssm.time_step_rank");
  const int64_t dk = u32("ssm.state_size"), inner = u32("ssm.inner_size");
  const int64_t r = n_v / n_k, dv = inner / n_v, key_dim = n_k * dk;
  // Tiled head (qwen35) of grouped head g = kh * r + j.
  const auto tiled = [&](int64_t g) { return (g % r) * n_k + g / r; };
  const auto rows = [](const GgufTensorInfo& t, int64_t first, int64_t n) {
    const auto* f = reinterpret_cast<const float*>(t.data);
    return std::vector<float>(f + first * t.ne[0], f + (first + n) * t.ne[0]);
  };
  const auto append = [](std::vector<float>& out, const std::vector<float>& part) {
    out.insert(out.end(), part.begin(), part.end());
  };
  const auto add = [&](const std::string& name, std::vector<int64_t> ne,
                       const std::vector<float>& data) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
    EXPECT_TRUE(
        w.add_tensor(name, GgmlType::F32, ne, {bytes, bytes + data.size() * sizeof(float)}).ok())
        << name;
  };
  for (const GgufTensorInfo& t : src.tensors()) {
    const std::string name(t.name);
    EXPECT_EQ(t.ggml_type(), GgmlType::F32) << name;
    const size_t dot = name.find('.', 4);
    const std::string prefix = name.substr(0, dot + 1), what = name.substr(dot + 1);
    const auto* f = reinterpret_cast<const float*>(t.data);
    if (what == "attn_qkv.weight") {
      const GgufTensorInfo& gate = *src.find_tensor(prefix + "attn_gate.weight");
      std::vector<float> in;
      for (int64_t kh = 0; kh < n_k; ++kh) {
        append(in, rows(t, kh * dk, dk));
        append(in, rows(t, key_dim + kh * dk, dk));
        for (int64_t j = 0; j < r; ++j)
          append(in, rows(t, 2 * key_dim + tiled(kh * r + j) * dv, dv));
        for (int64_t j = 0; j < r; ++j) append(in, rows(gate, tiled(kh * r + j) * dv, dv));
      }
      add(prefix + "ssm_in.weight", {t.ne[0], n_k * (2 * dk + 2 * r * dv)}, in);
    } else if (what == "ssm_beta.weight") {
      const GgufTensorInfo& alpha = *src.find_tensor(prefix + "ssm_alpha.weight");
      std::vector<float> ba;
      for (int64_t kh = 0; kh < n_k; ++kh) {
        for (int64_t j = 0; j < r; ++j) append(ba, rows(t, tiled(kh * r + j), 1));
        for (int64_t j = 0; j < r; ++j) append(ba, rows(alpha, tiled(kh * r + j), 1));
      }
      add(prefix + "ssm_ba.weight", {t.ne[0], 2 * n_v}, ba);
    } else if (what == "attn_gate.weight" || what == "ssm_alpha.weight") {
      continue;                                // fused above
    } else if (what == "ssm_conv1d.weight") {  // [channels][taps]: the value channels regrouped
      std::vector<float> conv = rows(t, 0, 2 * key_dim);
      for (int64_t g = 0; g < n_v; ++g) append(conv, rows(t, 2 * key_dim + tiled(g) * dv, dv));
      add(name, {t.ne[0], t.ne[1]}, conv);
    } else if (what == "ssm_dt.bias" || what == "ssm_a") {
      std::vector<float> v;
      for (int64_t g = 0; g < n_v; ++g) v.push_back(f[tiled(g)]);
      add(what == "ssm_a" ? name : prefix + "ssm_dt", {t.ne[0]}, v);
    } else if (what == "ssm_out.weight") {  // [n_embd][value_dim]: the value columns regrouped
      std::vector<float> out;
      for (int64_t row = 0; row < t.ne[1]; ++row)
        for (int64_t g = 0; g < n_v; ++g)
          out.insert(out.end(), f + row * t.ne[0] + tiled(g) * dv,
                     f + row * t.ne[0] + (tiled(g) + 1) * dv);
      add(name, {t.ne[0], t.ne[1]}, out);
    } else {
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      EXPECT_TRUE(w.add_tensor(name, t.ggml_type(), ne, {t.data, t.data + t.n_bytes}).ok());
    }
  }
  return w.to_bytes();
}

}  // namespace vela::test
