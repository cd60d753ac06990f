// The scale of the attention scores: 1/sqrt(head_dim) by default, 1/sqrt(n_embd / n_head) for the
// Gemma 2/3 27B (recognised by layer count, as the reference engines do), attention.scale where a
// file states it. A synthesized Gemma 2 whose n_embd / n_head (32) differs from its head size (64)
// tells the three apart in the config and in the logits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/decoder_forward.h"
#include "model/model.h"
#include "sequence_runner.h"

namespace vela {
namespace {

constexpr int32_t kEmbd = 64, kHeads = 2, kHeadDim = 64, kFf = 64, kVocab = 32;

// A random-weight Gemma 2 (or 3) of n_layer layers with key_length 64 and n_embd / n_head 32;
// `scale` > 0 writes it as attention.scale.
std::vector<uint8_t> synthetic_gemma(const std::string& arch, int32_t n_layer, float scale = 0) {
  GgufWriter w;
  const std::string a = arch + ".";
  w.add_string("general.architecture", arch);
  w.add_u32(a + "embedding_length", kEmbd);
  w.add_u32(a + "block_count", uint32_t(n_layer));
  w.add_u32(a + "feed_forward_length", kFf);
  w.add_u32(a + "attention.head_count", kHeads);
  w.add_u32(a + "attention.head_count_kv", 1);
  w.add_u32(a + "attention.key_length", kHeadDim);
  w.add_u32(a + "attention.value_length", kHeadDim);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (scale > 0) w.add_f32(a + "attention.scale", scale);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto tensor = [&](const std::string& name, int64_t rows, int64_t cols, bool norm) {
    std::vector<float> v(size_t(rows * cols));
    for (float& x : v) x = norm ? 0.1f * normal(rng) : normal(rng) * 2.0f / std::sqrt(float(cols));
    std::vector<int64_t> ne = {cols};
    if (rows > 1) ne.push_back(rows);
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    EXPECT_TRUE(w.add_tensor(name, GgmlType::F32, ne, {bytes, v.size() * 4}).ok());
  };
  const int64_t q_dim = kHeads * kHeadDim;
  tensor("token_embd.weight", kVocab, kEmbd, false);
  for (int32_t i = 0; i < n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"})
      tensor(p + n + ".weight", 1, kEmbd, true);
    if (arch == "gemma3") {
      tensor(p + "attn_q_norm.weight", 1, kHeadDim, true);
      tensor(p + "attn_k_norm.weight", 1, kHeadDim, true);
    }
    tensor(p + "attn_q.weight", q_dim, kEmbd, false);
    tensor(p + "attn_k.weight", kHeadDim, kEmbd, false);
    tensor(p + "attn_v.weight", kHeadDim, kEmbd, false);
    tensor(p + "attn_output.weight", kEmbd, q_dim, false);
    tensor(p + "ffn_gate.weight", kFf, kEmbd, false);
    tensor(p + "ffn_up.weight", kFf, kEmbd, false);
    tensor(p + "ffn_down.weight", kEmbd, kFf, false);
  }
  tensor("output_norm.weight", 1, kEmbd, true);
  return w.to_bytes();
}

std::shared_ptr<const Model> load(const std::vector<uint8_t>& bytes) {
  auto g = GgufFile::from_bytes(bytes);
  EXPECT_TRUE(g.ok()) << g.message();
  if (!g.ok()) return nullptr;
  auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

TEST(QueryScale, TheGemma27BScalesByItsWidthOthersByTheHeadSize) {
  const float by_head = 1.0f / std::sqrt(float(kHeadDim));
  const float by_width = 1.0f / std::sqrt(float(kEmbd / kHeads));
  struct Case {
    const char* arch;
    int32_t n_layer;
    float want;
  };
  for (const Case& c : {Case{"gemma2", 46, by_width}, Case{"gemma2", 42, by_head},
                        Case{"gemma3", 62, by_width}, Case{"gemma3", 46, by_head}}) {
    auto model = load(synthetic_gemma(c.arch, c.n_layer));
    ASSERT_TRUE(model);
    EXPECT_FLOAT_EQ(model->config().attn_scale, c.want) << c.arch << " " << c.n_layer;
  }
  // The file's own key wins.
  auto stated = load(synthetic_gemma("gemma2", 46, 0.25f));
  ASSERT_TRUE(stated);
  EXPECT_FLOAT_EQ(stated->config().attn_scale, 0.25f);
  // Outside [1e-6, 1e3] it is a clear error.
  auto g = GgufFile::from_bytes(synthetic_gemma("gemma2", 2, 1e6f));
  ASSERT_TRUE(g.ok());
  auto bad = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("gemma2.attention.scale"), std::string::npos) << bad.message();
}

// The 27B's logits are those of the same weights with its width's scale stated in the file, and
// not those with the head size's: the scale reaches the attention.
TEST(QueryScale, TheDerivedScaleIsTheOneTheLogitsUse) {
  const std::vector<int32_t> prompt = {1, 5, 9, 2, 30, 17, 4, 11};
  const auto logits = [&](float stated) {
    auto model = load(synthetic_gemma("gemma2", 46, stated));
    EXPECT_TRUE(model);
    if (!model) return std::vector<float>{};
    test::SequenceRunner runner(model, KvType::kF32);
    return runner.append(prompt);
  };
  const std::vector<float> derived = logits(0.0f);
  ASSERT_FALSE(derived.empty());
  EXPECT_EQ(derived, logits(1.0f / std::sqrt(float(kEmbd / kHeads))));
  const std::vector<float> by_head = logits(1.0f / std::sqrt(float(kHeadDim)));
  float largest = 0;
  for (size_t i = 0; i < derived.size(); ++i)
    largest = std::max(largest, std::abs(derived[i] - by_head[i]));
  EXPECT_GT(largest, 1e-3f);
}

}  // namespace
}  // namespace vela
