// Hostile GGUF files: truncations, flipped bytes, absurd counts, offsets past the end and
// overflowing sizes give an error, never a crash, a hang or a huge allocation (run under ASan).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/shared_data.h"

namespace vela {
namespace {

std::vector<uint8_t> small_model_bytes() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 1);
  const std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "a"};
  w.add_strings("tokenizer.ggml.tokens", toks);
  const std::vector<float> scores = {0, 0, 0, -1};
  w.add_f32s("tokenizer.ggml.scores", scores);
  std::vector<float> data(64, 0.5f);
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const int64_t ne[] = {32, 2};
  EXPECT_TRUE(w.add_tensor("token_embd.weight", GgmlType::F32, ne, {p, p + 256}).ok());
  return w.to_bytes();
}

// Where the n_tensors and n_kv counts sit in the header.
constexpr size_t kTensorCountPos = 8;
constexpr size_t kKvCountPos = 16;

template <class T>
void poke(std::vector<uint8_t>& b, size_t pos, T v) {
  std::memcpy(b.data() + pos, &v, sizeof(T));
}

TEST(GgufBadInput, EveryTruncationIsAnError) {
  const std::vector<uint8_t> good = small_model_bytes();
  ASSERT_TRUE(GgufFile::from_bytes(good).ok());
  for (size_t len = 0; len < good.size(); ++len) {
    auto f = GgufFile::from_bytes(std::span<const uint8_t>(good.data(), len));
    // Cutting only the padding after the last tensor's data still leaves a readable header, but
    // the tensor data then runs past the end: every strict prefix must fail.
    EXPECT_FALSE(f.ok()) << "prefix of " << len << " bytes parsed";
  }
}

TEST(GgufBadInput, AbsurdCountsAreRejectedBeforeAllocating) {
  std::vector<uint8_t> b = small_model_bytes();
  poke<uint64_t>(b, kTensorCountPos, ~uint64_t(0));
  EXPECT_FALSE(GgufFile::from_bytes(b).ok());
  b = small_model_bytes();
  poke<uint64_t>(b, kKvCountPos, uint64_t(1) << 60);
  EXPECT_FALSE(GgufFile::from_bytes(b).ok());
  // A string length of 2^63 in the first key.
  b = small_model_bytes();
  poke<uint64_t>(b, 24, uint64_t(1) << 63);
  EXPECT_FALSE(GgufFile::from_bytes(b).ok());
}

TEST(GgufBadInput, ArrayCountPastTheEndIsRejected) {
  GgufWriter w;
  GgufEncoder e;
  e.array_header(GgufValueType::UINT64, uint64_t(1) << 40);  // 8 TiB of u64 claimed
  w.add_raw("huge", GgufValueType::ARRAY, e.bytes);
  auto f = GgufFile::from_bytes(w.to_bytes());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("huge"), std::string::npos);
}

TEST(GgufBadInput, DeeplyNestedArraysAreRejected) {
  GgufEncoder e;
  for (int i = 0; i < 100; ++i) e.array_header(GgufValueType::ARRAY, 1);
  e.array_header(GgufValueType::UINT8, 0);
  GgufWriter w;
  w.add_raw("deep", GgufValueType::ARRAY, e.bytes);
  EXPECT_FALSE(GgufFile::from_bytes(w.to_bytes()).ok());
}

TEST(GgufBadInput, BadTensorInfosAreRejected) {
  const std::vector<float> data(32, 1.0f);
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&, size_t)> patch;  // gets the offset of n_dims
  };
  const std::vector<Case> cases = {
      {"zero dims", [](auto& b, size_t at) { poke<uint32_t>(b, at, 0); }},
      {"five dims", [](auto& b, size_t at) { poke<uint32_t>(b, at, 5); }},
      {"zero extent", [](auto& b, size_t at) { poke<uint64_t>(b, at + 4, 0); }},
      {"huge extent", [](auto& b, size_t at) { poke<uint64_t>(b, at + 4, uint64_t(1) << 62); }},
      {"offset past end", [](auto& b, size_t at) { poke<uint64_t>(b, at + 16, uint64_t(1) << 20); }},
      {"overflowing offset", [](auto& b, size_t at) { poke<uint64_t>(b, at + 16, ~uint64_t(31)); }},
      {"misaligned offset", [](auto& b, size_t at) { poke<uint64_t>(b, at + 16, 3); }},
      {"unknown type", [](auto& b, size_t at) { poke<uint32_t>(b, at + 12, 99); }},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    const int64_t ne[] = {32};
    ASSERT_TRUE(w.add_tensor("t", GgmlType::F32, ne, {p, p + 128}).ok());
    std::vector<uint8_t> b = w.to_bytes();
    const size_t n_dims_at = 24 + 8 + 1;  // header, name length, name "t"
    c.patch(b, n_dims_at);
    auto f = GgufFile::from_bytes(b);
    EXPECT_FALSE(f.ok()) << c.what;
  }
}

TEST(GgufBadInput, BadMagicVersionAndAlignment) {
  std::vector<uint8_t> b = small_model_bytes();
  b[0] = 'X';
  EXPECT_NE(GgufFile::from_bytes(b).message().find("magic"), std::string::npos);
  b = small_model_bytes();
  poke<uint32_t>(b, 4, 1);
  EXPECT_NE(GgufFile::from_bytes(b).message().find("version"), std::string::npos);
  for (uint32_t alignment : {0u, 1u, 3u, 4u, 48u, 1u << 21}) {
    // 1 and 4 are powers of two, but would let a tensor start where its floats and blocks
    // cannot be read in place.
    GgufWriter w;
    w.add_u32("general.alignment", alignment);
    const auto f = GgufFile::from_bytes(w.to_bytes());
    ASSERT_FALSE(f.ok()) << alignment;
    EXPECT_NE(f.message().find("general.alignment"), std::string::npos) << f.message();
  }
}

// Random byte flips in a real model's header region: any outcome but a crash is acceptable.
TEST(GgufBadInput, FlippedBytesInSharedModelNeverCrash) {
  VELA_REQUIRE_SHARED();
  std::ifstream in(test::shared_path("models/aidreams260K.gguf"), std::ios::binary);
  std::vector<uint8_t> good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(good.size(), 4096u);
  auto base = GgufFile::from_bytes(good);
  ASSERT_TRUE(base.ok());
  const size_t header = base->data_offset();
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> b = good;
    for (int k = 0; k < 4; ++k) b[rng() % header] ^= static_cast<uint8_t>(1u << (rng() % 8));
    auto f = GgufFile::from_bytes(b);
    if (f.ok()) {
      for (const auto& t : f->tensors()) ASSERT_LE(f->data_offset() + t.offset + t.n_bytes, f->file_size());
    }
  }
}

}  // namespace
}  // namespace vela
