// Tokenizer agreement with reference/<model>.jsonl: prompt_tokens (BOS per the model, special
// tokens parsed) must match exactly, and every greedy step's piece_hex must be the bytes
// token_to_piece() gives (and, concatenated, what the streaming detokenizer emits).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace vela {
namespace {

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

class ReferencePrompts : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferencePrompts, PromptTokensAndPiecesMatch) {
  VELA_REQUIRE_SHARED();
  const std::string model = GetParam();
  const auto jsonl = test::shared_path("reference/" + model + ".jsonl");
  const auto gguf_path = test::shared_path("models/" + model + ".gguf");
  if (!std::filesystem::exists(jsonl) || !std::filesystem::exists(gguf_path))
    GTEST_SKIP() << model << " reference or model not present";

  auto gguf = GgufFile::open(gguf_path.string());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();

  std::ifstream in(jsonl);
  std::string line;
  int n_prompts = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    const std::string prompt = record.at("prompt");
    SCOPED_TRACE(model + ": '" + prompt + "'");
    ++n_prompts;

    const auto expected_tokens = record.at("prompt_tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer->encode(prompt, /*add_special=*/true, /*parse_special=*/true),
              expected_tokens);

    StreamingDetokenizer stream(*tokenizer);
    std::string pieces, streamed;
    for (const auto& step : record.at("steps")) {
      const int32_t token = step.at("token");
      const std::string piece = tokenizer->token_to_piece(token);
      EXPECT_EQ(to_hex(piece), step.at("piece_hex").get<std::string>()) << "token " << token;
      pieces += piece;
      streamed += stream.push(token);
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, pieces);
    if (record.contains("text")) {
      EXPECT_EQ(pieces, record.at("text").get<std::string>());
    } else {
      EXPECT_EQ(to_hex(pieces), record.at("text_hex").get<std::string>());
    }
  }
  EXPECT_GT(n_prompts, 0);
}

INSTANTIATE_TEST_SUITE_P(AllModels, ReferencePrompts,
                         ::testing::Values("aidreams260K", "tiny-llama-gqa", "tiny-qwen2-bpe-F16",
                                           "tiny-llama-256-F32", "tiny-llama-256-F16",
                                           "tiny-llama-256-BF16", "tiny-llama-256-Q8_0",
                                           "tiny-llama-256-Q4_0", "tiny-llama-256-Q4_K_M",
                                           "tiny-llama-256-Q6_K"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace vela
