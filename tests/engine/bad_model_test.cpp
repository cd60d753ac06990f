// Hostile model files through the whole loading path (GGUF, hyper-parameters, weights,
// tokenizer): truncated copies and copies with flipped bytes of the shared models either fail to
// load with a message or load and generate — never a crash, hang or huge allocation (this test
// matters most in the sanitizer build).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "io/gguf.h"
#include "support/shared_data.h"
#include "vela/llm.h"

namespace vela {
namespace {

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string write_temp(const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::string path = vela::test::unique_temp_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

// Loads the file; when it loads, it must also generate without trouble.
void load_and_maybe_generate(const std::string& path) {
  LLMConfig config;
  config.model_path = path;
  config.max_context = 64;
  auto llm = LLM::load(config);
  if (!llm) {
    EXPECT_FALSE(llm.message().empty());
    return;
  }
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 4;
  auto out = (*llm)->generate({"Hello world"}, p);
  if (!out) {
    EXPECT_FALSE(out.message().empty());
  }
}

TEST(BadModel, TruncatedCopiesFailWithAMessage) {
  VELA_REQUIRE_SHARED();
  for (const char* name :
       {"aidreams260K.gguf", "tiny-qwen2-bpe-F16.gguf", "tiny-llama-256-Q4_K_M.gguf"}) {
    const auto bytes = read_file(test::shared_path(std::string("models/") + name));
    ASSERT_GT(bytes.size(), 1000u);
    auto header = GgufFile::from_bytes(bytes);
    ASSERT_TRUE(header.ok());
    // Cuts in the header, at the data start, and inside the tensor data.
    const size_t cuts[] = {0,
                           3,
                           20,
                           100,
                           1000,
                           header->data_offset() / 2,
                           header->data_offset(),
                           header->data_offset() + 7,
                           bytes.size() / 2,
                           bytes.size() - 1};
    for (size_t cut : cuts) {
      const std::vector<uint8_t> part(bytes.begin(), bytes.begin() + long(cut));
      LLMConfig config;
      config.model_path = write_temp(part, "truncated.gguf");
      auto llm = LLM::load(config);
      EXPECT_FALSE(llm.ok()) << name << " cut at " << cut;
      if (!llm) {
        EXPECT_NE(llm.message().find("truncated.gguf"), std::string::npos) << llm.message();
      }
    }
  }
}

TEST(BadModel, FlippedHeaderBytesNeverCrash) {
  VELA_REQUIRE_SHARED();
  std::mt19937_64 rng(7);
  for (const char* name : {"aidreams260K.gguf", "tiny-qwen2-bpe-F16.gguf"}) {
    const auto good = read_file(test::shared_path(std::string("models/") + name));
    auto header = GgufFile::from_bytes(good);
    ASSERT_TRUE(header.ok());
    const size_t header_size = header->data_offset();
    for (int trial = 0; trial < 25; ++trial) {
      std::vector<uint8_t> bytes = good;
      for (int k = 0; k < 3; ++k) bytes[rng() % header_size] ^= uint8_t(1u << (rng() % 8));
      load_and_maybe_generate(write_temp(bytes, "flipped.gguf"));
    }
  }
}

}  // namespace
}  // namespace vela
