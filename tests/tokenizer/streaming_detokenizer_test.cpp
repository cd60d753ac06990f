// StreamingDetokenizer: characters split across tokens come out whole, once complete.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace vela {
namespace {

Tokenizer make_spm() {
  auto spec = test::spm_vocab({{"\xE2\x96\x81", -1},
                               {"a", -2},
                               {"\xE2\x96\x81"
                                "a",
                                -1}});
  auto gguf = test::build_gguf(spec);
  EXPECT_TRUE(gguf.ok()) << gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  EXPECT_TRUE(tok.ok()) << tok.message();
  return std::move(*tok);
}

int32_t byte_token(uint8_t b) {
  return 3 + b;
}  // <0xNN> ids in test::spm_vocab

TEST(StreamingDetokenizer, ThreeByteCharacterSplitOverByteTokens) {
  const Tokenizer tok = make_spm();
  StreamingDetokenizer stream(tok);
  EXPECT_EQ(stream.push(byte_token(0xE2)), "");
  EXPECT_EQ(stream.push(byte_token(0x82)), "");
  EXPECT_EQ(stream.push(byte_token(0xAC)), "\xE2\x82\xAC");  // €
  EXPECT_EQ(stream.push(test::kFirstSpmPiece + 2), " a");    // "▁a" keeps its space
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamingDetokenizer, FourByteCharacterThenText) {
  const Tokenizer tok = make_spm();
  StreamingDetokenizer stream(tok);
  std::string out;
  for (uint8_t b : {0xF0, 0x9F, 0xA6}) out += stream.push(byte_token(b));
  EXPECT_EQ(out, "");
  EXPECT_EQ(stream.push(byte_token(0x99)), "\xF0\x9F\xA6\x99");  // 🦙
  EXPECT_EQ(stream.push(1), "");                                 // control tokens add nothing
  EXPECT_EQ(stream.push(test::kFirstSpmPiece + 1), "a");
}

TEST(StreamingDetokenizer, BytesThatCannotBecomeACharacterPassThrough) {
  const Tokenizer tok = make_spm();
  StreamingDetokenizer stream(tok);
  EXPECT_EQ(stream.push(byte_token(0xE2)), "");
  EXPECT_EQ(stream.push(test::kFirstSpmPiece + 1),
            "\xE2"
            "a");                                    // the sequence was broken
  EXPECT_EQ(stream.push(byte_token(0x80)), "\x80");  // stray continuation byte
  EXPECT_EQ(stream.push(byte_token(0xC3)), "");
  EXPECT_EQ(stream.flush(), "\xC3");  // end of stream: hand over what is left
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamingDetokenizer, RealModelEmojiOverByteTokens) {
  VELA_REQUIRE_SHARED();
  auto gguf = GgufFile::open(test::shared_path("models/aidreams260K.gguf").string());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::vector<int32_t> ids = tok->encode("🦙!", false, false);
  ASSERT_GE(ids.size(), 5u);  // "▁", four byte tokens, "!"
  StreamingDetokenizer stream(*tok);
  std::vector<std::string> outputs;
  for (int32_t id : ids) outputs.push_back(stream.push(id));
  std::string joined;
  for (const auto& o : outputs) {
    // Every emitted chunk is valid UTF-8 on its own: no half characters.
    for (size_t i = 0; i < o.size(); ++i) {
      const auto c = static_cast<unsigned char>(o[i]);
      if (c >= 0xF0) {
        ASSERT_LE(i + 4, o.size()) << "split 4-byte character";
        i += 3;
      }
    }
    joined += o;
  }
  EXPECT_EQ(joined + stream.flush(), " 🦙!");
}

}  // namespace
}  // namespace vela
