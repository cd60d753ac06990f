#pragma once
// Test helper: a random EAGLE-3 draft head for a target model, written as llama.cpp converts
// one (general.architecture eagle3; model_config.h Eagle3Config), with F32 weights. No shared
// file holds such a head, so tests build one for a shared target.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "model/model.h"

namespace vela::test {

// What random_eagle3_head writes differently from a good head (bad-head tests).
struct Eagle3HeadEdits {
  std::vector<std::string> drop_tensors;  // tensors left out (by name)
  std::vector<std::string> drop_keys;     // metadata keys left out
  // eagle3.extract_layers as given (any length) instead of the head's three.
  std::optional<std::vector<int32_t>> extract_layers;
  std::optional<int32_t> target_hidden_size;  // instead of the target's n_embd
  bool norm_before_residual = false;          // written as eagle3.norm_before_residual
  bool hidden_norm_as_attn_norm_2 = false;    // the hidden norm named blk.0.attn_norm_2.weight
  // output.weight [n_vocab, n_embd] of its own where the draft vocabulary is the target's (else
  // the target's head serves).
  bool own_output_without_d2t = false;
  std::optional<std::vector<int64_t>> d2t;  // instead of the random ids (n_draft_vocab entries)
  bool d2t_as_f32 = false;                  // d2t of type F32 (ids as floats) instead of I64
  int64_t attn_q_cols = 0;                  // attn_q's input width when not 0 (else 2 * n_embd)
  int64_t fc_cols = 0;                      // fc's input width when not 0 (else 3 * n_embd)
};

// n_draft_vocab (<= n_vocab) distinct target ids, ascending: the target's 16 first (its most
// common ones in these tests) and a random choice of the rest.
inline std::vector<int64_t> random_d2t(int32_t n_vocab, int32_t n_draft_vocab, uint32_t seed) {
  const int32_t n_first = std::min(16, n_draft_vocab);
  std::vector<int64_t> rest(size_t(n_vocab - n_first));
  std::iota(rest.begin(), rest.end(), n_first);
  std::mt19937 rng(seed);
  std::shuffle(rest.begin(), rest.end(), rng);
  std::vector<int64_t> ids(static_cast<size_t>(n_first));
  std::iota(ids.begin(), ids.end(), 0);
  ids.insert(ids.end(), rest.begin(), rest.begin() + (n_draft_vocab - n_first));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// A GGUF image of an EAGLE-3 head for `target`: n_embd the target's, 4 heads and 2 KV heads of
// n_embd / 4, FFN 2 * n_embd; matrices N(0, 1 / fan_in) (so logits are not flat), norm weights
// about 1. n_draft_vocab > 0: a d2t of that many target ids (random_d2t) and an output.weight
// of as many rows; 0: neither (the draft vocabulary and output head are the target's).
inline std::vector<uint8_t> random_eagle3_head(const Model& target, uint32_t seed,
                                               int32_t n_draft_vocab,
                                               std::array<int32_t, 3> extract_layers,
                                               const Eagle3HeadEdits& edits = {}) {
  const ModelConfig& tc = target.whole_config();
  const int64_t E = tc.n_embd, n_head = 4, n_head_kv = 2, hd = E / 4, ff = 2 * E;
  const int64_t n_draft = n_draft_vocab > 0 ? n_draft_vocab : tc.n_vocab;
  const auto dropped = [&](const std::string& name) {
    return std::find(edits.drop_tensors.begin(), edits.drop_tensors.end(), name) !=
           edits.drop_tensors.end();
  };
  const auto key_dropped = [&](const std::string& key) {
    return std::find(edits.drop_keys.begin(), edits.drop_keys.end(), key) != edits.drop_keys.end();
  };

  GgufWriter w;
  const auto u32 = [&](const std::string& key, int64_t v) {
    if (!key_dropped(key)) w.add_u32(key, uint32_t(v));
  };
  w.add_string("general.architecture", "eagle3");
  w.add_string("general.name", "random-eagle3");
  u32("eagle3.context_length", tc.n_ctx_train);
  u32("eagle3.embedding_length", E);
  u32("eagle3.block_count", 1);
  u32("eagle3.feed_forward_length", ff);
  u32("eagle3.attention.head_count", n_head);
  u32("eagle3.attention.head_count_kv", n_head_kv);
  if (!key_dropped("eagle3.attention.layer_norm_rms_epsilon"))
    w.add_f32("eagle3.attention.layer_norm_rms_epsilon", 1e-5f);
  if (!key_dropped("eagle3.rope.freq_base")) w.add_f32("eagle3.rope.freq_base", 10000.0f);
  u32("eagle3.target_hidden_size", edits.target_hidden_size.value_or(int32_t(E)));
  const std::vector<int32_t> layers = edits.extract_layers.value_or(
      std::vector<int32_t>(extract_layers.begin(), extract_layers.end()));
  if (!key_dropped("eagle3.extract_layers")) w.add_i32s("eagle3.extract_layers", layers);
  if (edits.norm_before_residual) w.add_bool("eagle3.norm_before_residual", true);

  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // A [rows, cols] matrix (GGUF ne {cols, rows}) scaled by 1/sqrt(cols), or a vector of n about 1.
  const auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    std::vector<float> v(size_t(rows * cols));
    const float scale = 1.0f / std::sqrt(float(cols));
    for (float& x : v) x = normal(rng) * scale;
    if (dropped(name)) return;
    const std::vector<int64_t> ne = {cols, rows};
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    EXPECT_TRUE(w.add_tensor(name, GgmlType::F32, ne, {bytes, v.size() * sizeof(float)}).ok());
  };
  const auto norm_weight = [&](const std::string& name, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = 1.0f + 0.2f * normal(rng);
    if (dropped(name)) return;
    const std::vector<int64_t> ne = {n};
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    EXPECT_TRUE(w.add_tensor(name, GgmlType::F32, ne, {bytes, v.size() * sizeof(float)}).ok());
  };

  // d2t: the writer has no I64 tensors, so the ids go in as an F32 tensor of twice the length
  // whose header the bytes are patched to (I64, n) below.
  std::vector<int64_t> d2t;
  if (n_draft_vocab > 0) d2t = edits.d2t.value_or(random_d2t(tc.n_vocab, n_draft_vocab, seed));
  if (!d2t.empty() && !dropped("d2t")) {
    std::vector<int64_t> ne = {int64_t(d2t.size()) * 2};
    std::vector<uint8_t> bytes(d2t.size() * sizeof(int64_t));
    std::memcpy(bytes.data(), d2t.data(), bytes.size());
    if (edits.d2t_as_f32) {
      std::vector<float> ids(d2t.begin(), d2t.end());
      ne = {int64_t(ids.size())};
      bytes.assign(reinterpret_cast<const uint8_t*>(ids.data()),
                   reinterpret_cast<const uint8_t*>(ids.data() + ids.size()));
    }
    EXPECT_TRUE(w.add_tensor("d2t", GgmlType::F32, ne, bytes).ok());
  }
  matrix("fc.weight", E, edits.fc_cols > 0 ? edits.fc_cols : 3 * E);
  norm_weight("output_norm.weight", E);
  if (n_draft_vocab > 0 || edits.own_output_without_d2t) matrix("output.weight", n_draft, E);
  norm_weight("blk.0.attn_norm.weight", E);
  norm_weight(
      edits.hidden_norm_as_attn_norm_2 ? "blk.0.attn_norm_2.weight" : "blk.0.hidden_norm.weight",
      E);
  matrix("blk.0.attn_q.weight", n_head * hd, edits.attn_q_cols > 0 ? edits.attn_q_cols : 2 * E);
  matrix("blk.0.attn_k.weight", n_head_kv * hd, 2 * E);
  matrix("blk.0.attn_v.weight", n_head_kv * hd, 2 * E);
  matrix("blk.0.attn_output.weight", E, n_head * hd);
  norm_weight("blk.0.ffn_norm.weight", E);
  matrix("blk.0.ffn_gate.weight", ff, E);
  matrix("blk.0.ffn_up.weight", ff, E);
  matrix("blk.0.ffn_down.weight", E, ff);

  std::vector<uint8_t> image = w.to_bytes();
  if (!d2t.empty() && !dropped("d2t") && !edits.d2t_as_f32) {
    // The tensor info: name (u64 length, bytes), n_dims u32, ne u64 each, type u32, offset u64.
    const std::string name = "d2t";
    std::vector<uint8_t> info(sizeof(uint64_t));
    const uint64_t length = name.size();
    std::memcpy(info.data(), &length, sizeof(length));
    info.insert(info.end(), name.begin(), name.end());
    const auto at = std::search(image.begin(), image.end(), info.begin(), info.end());
    EXPECT_NE(at, image.end());
    if (at != image.end()) {
      uint8_t* p = &*at + info.size() + sizeof(uint32_t);
      const uint64_t n = d2t.size();
      const uint32_t i64 = uint32_t(GgmlType::I64);
      std::memcpy(p, &n, sizeof(n));
      std::memcpy(p + sizeof(uint64_t), &i64, sizeof(i64));
    }
  }
  return image;
}

}  // namespace vela::test
