// The streaming GGUF writer: the bytes equal the in-memory GgufWriter's for the same content
// (whatever the piece sizes the data arrives in), the file reads back, and misuse (too much or
// too little data, bad shapes) is an error that leaves no file behind.
#include <gtest/gtest.h>

#include "support/shared_data.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tools_support/gguf_stream_writer.h"

namespace vela {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string temp_path(const std::string& name) {
  return vela::test::unique_temp_path("vela_stream_" + name);
}

TEST(GgufStreamWriter, MatchesInMemoryWriterForAnyPieceSize) {
  // Three tensors whose sizes are not multiples of the alignment (padding between them).
  std::vector<uint8_t> a(3 * 4), b(34 * 5), c(2 * 2);  // F32 [3], Q8_0 [32, 5], F16 [2]
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 7 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 13 + 5);
  for (size_t i = 0; i < c.size(); ++i) c[i] = uint8_t(i + 100);
  const int64_t ne_a[] = {3}, ne_b[] = {32, 5}, ne_c[] = {2};

  GgufWriter ref;
  ref.add_string("general.architecture", "llama");
  ref.add_u32("llama.block_count", 7);
  ref.add_f32("llama.rope.freq_base", 10000.0f);
  ASSERT_TRUE(ref.add_tensor("a", GgmlType::F32, ne_a, a).ok());
  ASSERT_TRUE(ref.add_tensor("b", GgmlType::Q8_0, ne_b, b).ok());
  ASSERT_TRUE(ref.add_tensor("c", GgmlType::F16, ne_c, c).ok());
  const std::vector<uint8_t> expected = ref.to_bytes();

  for (size_t piece : {size_t(1), size_t(5), size_t(64), size_t(1000)}) {
    GgufStreamWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 7);
    w.add_f32("llama.rope.freq_base", 10000.0f);
    ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, ne_a).ok());
    ASSERT_TRUE(w.add_tensor("b", GgmlType::Q8_0, ne_b).ok());
    ASSERT_TRUE(w.add_tensor("c", GgmlType::F16, ne_c).ok());
    EXPECT_EQ(w.total_bytes(), expected.size());
    const std::string path = temp_path("pieces.gguf");
    ASSERT_TRUE(w.open(path).ok());
    std::vector<uint8_t> all(a);
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), c.begin(), c.end());
    for (size_t i = 0; i < all.size(); i += piece) {
      const size_t n = std::min(piece, all.size() - i);
      ASSERT_TRUE(w.write({all.data() + i, n}).ok());
    }
    ASSERT_TRUE(w.finish().ok());
    EXPECT_EQ(read_all(path), expected) << "piece size " << piece;
    auto g = GgufFile::open(path);
    ASSERT_TRUE(g.ok()) << g.message();
    ASSERT_EQ(g->tensors().size(), 3u);
    EXPECT_EQ(std::vector<uint8_t>(g->tensors()[1].data, g->tensors()[1].data + b.size()), b);
    EXPECT_FALSE(std::filesystem::exists(path + ".part"));
  }
}

TEST(GgufStreamWriter, CopiesValuesFromAnotherFile) {
  GgufWriter src;
  const std::vector<std::string> tokens = {"a", "b", "c"};
  src.add_strings("tokenizer.ggml.tokens", tokens);
  src.add_bool("tokenizer.ggml.add_bos_token", true);
  auto g = GgufFile::from_bytes(src.to_bytes());
  ASSERT_TRUE(g.ok());
  GgufStreamWriter w;
  for (const auto& [k, v] : g->metadata()) w.add_value(k, v);
  const std::string path = temp_path("copy.gguf");
  ASSERT_TRUE(w.open(path).ok());
  ASSERT_TRUE(w.finish().ok());
  EXPECT_EQ(read_all(path), src.to_bytes());
}

TEST(GgufStreamWriter, MisuseIsAnErrorAndLeavesNoFile) {
  const int64_t ne[] = {4};
  {
    GgufStreamWriter w;
    ASSERT_TRUE(w.add_tensor("t", GgmlType::F32, ne).ok());
    const std::string path = temp_path("short.gguf");
    ASSERT_TRUE(w.open(path).ok());
    const uint8_t bytes[20] = {};
    EXPECT_FALSE(w.write({bytes, 20}).ok());  // 16 bytes declared
  }
  {
    const std::string path = temp_path("incomplete.gguf");
    std::filesystem::remove(path);
    {
      GgufStreamWriter w;
      ASSERT_TRUE(w.add_tensor("t", GgmlType::F32, ne).ok());
      ASSERT_TRUE(w.open(path).ok());
      const uint8_t bytes[8] = {};
      ASSERT_TRUE(w.write({bytes, 8}).ok());
      const Status st = w.finish();
      EXPECT_FALSE(st.ok());
      EXPECT_NE(st.message().find("'t'"), std::string::npos) << st.message();
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path + ".part"));
  }
  GgufStreamWriter w;
  const int64_t bad_row[] = {33, 2};
  EXPECT_FALSE(w.add_tensor("q", GgmlType::Q8_0, bad_row).ok());  // not whole blocks
  const int64_t zero[] = {0};
  EXPECT_FALSE(w.add_tensor("z", GgmlType::F32, zero).ok());
  EXPECT_FALSE(w.open("/nonexistent-dir/x.gguf").ok());
}

}  // namespace
}  // namespace vela
