// Hostile or broken tokenizer metadata gives a clear error from Tokenizer::from_gguf, never a
// crash; a few odd-but-legal values load with documented behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace vela {
namespace {

// The error message of loading `spec`; "" if it loaded.
std::string load_error(const test::VocabSpec& spec) {
  auto gguf = test::build_gguf(spec);
  if (!gguf.ok()) return "gguf: " + gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  return tok.ok() ? "" : tok.message();
}

Tokenizer load(const test::VocabSpec& spec) {
  auto gguf = test::build_gguf(spec);
  EXPECT_TRUE(gguf.ok()) << gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  EXPECT_TRUE(tok.ok()) << tok.message();
  return std::move(*tok);
}

#define EXPECT_ERROR_MENTIONS(spec, text)                                     \
  do {                                                                        \
    const std::string message = load_error(spec);                             \
    EXPECT_NE(message.find(text), std::string::npos) << "error: " << message; \
  } while (0)

test::VocabSpec small_spm() {
  return test::spm_vocab({{"a", -1}});
}
test::VocabSpec small_bpe() {
  return test::bpe_vocab({"ab"}, {"a b"});
}

TEST(MalformedTokenizer, ModelKey) {
  auto spec = small_spm();
  spec.model.reset();
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.model");
  spec.model = "bert";
  EXPECT_ERROR_MENTIONS(spec, "unsupported tokenizer 'bert'");
  spec.model.reset();
  spec.extra = [](GgufWriter& w) { w.add_u32("tokenizer.ggml.model", 1); };
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.model");
}

TEST(MalformedTokenizer, TokenList) {
  auto spec = small_spm();
  spec.tokens.clear();
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.tokens");
  spec.extra = [](GgufWriter& w) { w.add_i32s("tokenizer.ggml.tokens", std::vector<int32_t>{1}); };
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.tokens");
}

TEST(MalformedTokenizer, ArrayLengthsMustMatch) {
  auto spec = small_spm();
  spec.scores.pop_back();
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.scores");
  spec = small_spm();
  spec.types.push_back(1);
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.token_type");
}

TEST(MalformedTokenizer, BadValuesInArrays) {
  auto spec = small_spm();
  spec.types.back() = 9;
  EXPECT_ERROR_MENTIONS(spec, "unknown type 9");
  spec = small_spm();
  spec.scores.back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_ERROR_MENTIONS(spec, "NaN");
  spec = small_spm();
  spec.types.back() = 6;  // a byte token must look like <0xNN>
  EXPECT_ERROR_MENTIONS(spec, "<0xNN>");
}

TEST(MalformedTokenizer, SpecialIdsOutOfRangeOrMistyped) {
  auto spec = small_spm();
  spec.extra = [](GgufWriter& w) { w.add_u32("tokenizer.ggml.bos_token_id", 5000); };
  EXPECT_ERROR_MENTIONS(spec, "outside the vocabulary");
  spec.extra = [](GgufWriter& w) { w.add_i32("tokenizer.ggml.eos_token_id", -7); };
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.eos_token_id");
  spec.extra = [](GgufWriter& w) { w.add_string("tokenizer.ggml.unknown_token_id", "0"); };
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.unknown_token_id");
  spec.extra = [](GgufWriter& w) { w.add_string("tokenizer.ggml.add_bos_token", "yes"); };
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.add_bos_token");
}

TEST(MalformedTokenizer, AddBosNeedsABosToken) {
  auto spec = small_spm();
  spec.extra = [](GgufWriter& w) { w.add_i32("tokenizer.ggml.bos_token_id", -1); };
  EXPECT_ERROR_MENTIONS(spec, "no BOS token");
  auto bpe = small_bpe();
  bpe.extra = [](GgufWriter& w) { w.add_bool("tokenizer.ggml.add_bos_token", true); };
  EXPECT_ERROR_MENTIONS(bpe, "no BOS token");
}

TEST(MalformedTokenizer, Merges) {
  auto spec = small_bpe();
  spec.merges.clear();
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.merges");
  for (const char* bad : {"ab", "a ", " ", ""}) {
    spec.merges = {"a b", bad};
    EXPECT_ERROR_MENTIONS(spec, "entry #1");
  }
  spec.merges.clear();
  spec.extra = [](GgufWriter& w) { w.add_i32s("tokenizer.ggml.merges", std::vector<int32_t>{1}); };
  EXPECT_ERROR_MENTIONS(spec, "tokenizer.ggml.merges");
}

TEST(MalformedTokenizer, UnknownPreTokenizerListsSupportedOnes) {
  auto spec = small_bpe();
  spec.pre = "no-such-pre";
  const std::string message = load_error(spec);
  EXPECT_NE(message.find("unknown pre-tokenizer 'no-such-pre'"), std::string::npos) << message;
  for (const char* name : {"default", "llama3", "llama-bpe", "qwen2", "gpt2", "falcon", "starcoder",
                           "deepseek-coder", "refact"})
    EXPECT_NE(message.find(name), std::string::npos) << name;
}

TEST(OddTokenizerMetadata, MissingPreTokenizerFallsBackToDefaultWithWarning) {
  auto spec = small_bpe();
  spec.pre.reset();
  const Tokenizer tok = load(spec);
  ASSERT_FALSE(tok.load_warnings().empty());
  EXPECT_NE(tok.load_warnings()[0].find("'default'"), std::string::npos);
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{256}));
}

TEST(OddTokenizerMetadata, NoneIdsDuplicatesAndEmptyTexts) {
  auto spec = small_spm();
  spec.tokens.push_back("a");  // duplicate of the last piece
  spec.types.push_back(1);
  spec.scores.push_back(0);
  spec.tokens.push_back("");  // empty text
  spec.types.push_back(1);
  spec.scores.push_back(0);
  spec.extra = [](GgufWriter& w) {
    w.add_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // how converters write "none"
    w.add_i32("tokenizer.ggml.eos_token_id", -1);
  };
  const Tokenizer tok = load(spec);
  EXPECT_EQ(tok.padding_id(), -1);
  EXPECT_EQ(tok.eos_id(), -1);
  EXPECT_EQ(tok.bos_id(), 1);  // SentencePiece default
  EXPECT_FALSE(tok.load_warnings().empty());
  const auto ids = tok.encode("a", false, false);  // "▁a": "▁" as a byte sequence, then "a"
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), test::kFirstSpmPiece);  // the lower id of the duplicate
  EXPECT_EQ(tok.token_to_piece(test::kFirstSpmPiece + 2), "");
}

}  // namespace
}  // namespace vela
