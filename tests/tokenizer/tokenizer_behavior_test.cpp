// Tokenizer behaviour on small hand-built vocabularies: merge order, byte fallback, special
// tokens, end-of-generation detection, the leading-space rules and hostile input text.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace vela {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer make(const test::VocabSpec& spec) {
  auto gguf = test::build_gguf(spec);
  EXPECT_TRUE(gguf.ok()) << gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  EXPECT_TRUE(tok.ok()) << tok.message();
  return std::move(*tok);
}

constexpr int32_t P = test::kFirstSpmPiece;  // id of the first SPM piece

TEST(SpmTokenizer, MergesHighestScoreFirst) {
  // "abc": both "ab" and "bc" are tokens; the higher score wins.
  auto spec = test::spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -2}});
  spec.extra = [](GgufWriter& w) { w.add_bool("tokenizer.ggml.add_space_prefix", false); };
  EXPECT_EQ(make(spec).encode("abc", false, false), (Ids{P + 3, P + 2}));

  auto spec2 = test::spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -1}});
  spec2.extra = spec.extra;
  EXPECT_EQ(make(spec2).encode("abc", false, false), (Ids{P + 0, P + 4}));
}

TEST(SpmTokenizer, EqualScoresMergeLeftmostFirst) {
  auto spec = test::spm_vocab({{"a", -5}, {"aa", -1}});
  spec.extra = [](GgufWriter& w) { w.add_bool("tokenizer.ggml.add_space_prefix", false); };
  EXPECT_EQ(make(spec).encode("aaa", false, false), (Ids{P + 1, P + 0}));
}

TEST(SpmTokenizer, SpacePrefixAndBosAndByteFallback) {
  const Tokenizer tok = make(test::spm_vocab({{"\xE2\x96\x81", -1},
                                              {"h", -2},
                                              {"i", -2},
                                              {"\xE2\x96\x81h", -0.5f},
                                              {"\xE2\x96\x81hi", -0.1f}}));
  EXPECT_TRUE(tok.add_bos());
  EXPECT_FALSE(tok.add_eos());
  EXPECT_EQ(tok.encode("hi", true, false), (Ids{1, P + 4}));
  EXPECT_EQ(tok.encode("hi hi", false, false), (Ids{P + 4, P + 4}));
  // "é" (C3 A9) is not a piece: two byte tokens, <0xC3> = 3 + 0xC3.
  EXPECT_EQ(tok.encode("é", false, false), (Ids{P + 0, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok.encode("", true, false), (Ids{1}));
  EXPECT_EQ(tok.encode("", false, false), Ids{});

  // Decoding drops the space encode() added, except after an explicit BOS (reference rule).
  EXPECT_EQ(tok.decode(tok.encode("hi hi", false, false)), "hi hi");
  EXPECT_EQ(tok.decode(tok.encode("hi", true, false)), " hi");
  EXPECT_EQ(tok.decode(tok.encode("hi", true, false), /*skip_special=*/false), "<s> hi");
  EXPECT_EQ(tok.token_to_piece(P + 4), " hi");
  EXPECT_EQ(tok.token_to_piece(3 + 0xC3), "\xC3");
  EXPECT_EQ(tok.token_to_piece(1), "");
  EXPECT_EQ(tok.token_to_piece(1, /*render_special=*/true), "<s>");
  EXPECT_EQ(tok.token_to_piece(-1), "");
  EXPECT_EQ(tok.token_to_piece(1 << 30), "");
}

TEST(SpmTokenizer, UnknownTokenWithoutByteFallback) {
  test::VocabSpec spec;
  spec.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a"};
  spec.types = {2, 3, 3, 1, 1};
  spec.scores = {0, 0, 0, -1, -1};
  const Tokenizer tok = make(spec);
  EXPECT_EQ(tok.encode("a\xC3\xA9", false, false), (Ids{3, 4, 0}));
  EXPECT_EQ(tok.decode(Ids{3, 4, 0}), "a");  // <unk> renders as nothing
}

TEST(SpmTokenizer, SpecialTokensAndSpacePrefixAfterThem) {
  const Tokenizer tok = make(test::spm_vocab({{"\xE2\x96\x81", -1},
                                              {"h", -2},
                                              {"i", -2},
                                              {"\xE2\x96\x81h", -0.5f},
                                              {"\xE2\x96\x81hi", -0.1f},
                                              {"<", -3},
                                              {"s", -3},
                                              {">", -3}}));
  // parse_special: "<s>" is BOS and the text after it gets the space prefix again.
  EXPECT_EQ(tok.encode("hi<s>hi", false, true), (Ids{P + 4, 1, P + 4}));
  // Without parse_special the control text is ordinary text.
  EXPECT_EQ(tok.encode("<s>", false, false), (Ids{P + 0, P + 5, P + 6, P + 7}));
}

TEST(BpeTokenizer, MergesLowestRankFirst) {
  auto spec = test::bpe_vocab({"ab", "bc"}, {"a b", "b c"});
  EXPECT_EQ(make(spec).encode("abc", false, false), (Ids{256, 'c'}));
  auto spec2 = test::bpe_vocab({"ab", "bc"}, {"b c", "a b"});
  EXPECT_EQ(make(spec2).encode("abc", false, false), (Ids{'a', 257}));
}

TEST(BpeTokenizer, WordsAreMergedSeparatelyAndDecodeIsLossless) {
  // "Ġ" is the byte-level character for ' '.
  auto spec = test::bpe_vocab({"he", "ll", "hell", "hello", "\xC4\xA0w", "\xC4\xA0wo"},
                              {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "\xC4\xA0w o"});
  const Tokenizer tok = make(spec);
  EXPECT_FALSE(tok.add_bos());  // byte-level BPE adds BOS only when the file says so
  const Ids ids = tok.encode("hello wor\n", false, false);
  EXPECT_EQ(ids, (Ids{259, 261, 'r', '\n'}));
  EXPECT_EQ(tok.decode(ids), "hello wor\n");
  EXPECT_EQ(tok.token_to_piece(261), " wo");
  // Raw bytes that are not UTF-8 still encode byte by byte and decode back unchanged.
  const std::string invalid = "a\xFF\xC3(\xE2\x82 z\x80";
  EXPECT_EQ(tok.decode(tok.encode(invalid, false, false)), invalid);
}

TEST(BpeTokenizer, SpecialTokensEndOfGenerationAndUserDefined) {
  auto spec = test::bpe_vocab({"<|im_start|>", "<|im_end|>", "<tool>", "<|endoftext|>"}, {"a b"});
  spec.types[256] = 3;  // control
  spec.types[257] = 1;  // an end-of-turn text not marked control: the reference repairs it
  spec.types[258] = 4;  // user-defined
  spec.types[259] = 3;
  spec.extra = [](GgufWriter& w) { w.add_u32("tokenizer.ggml.eos_token_id", 259); };
  const Tokenizer tok = make(spec);

  EXPECT_EQ(tok.encode("<|im_start|>x<|im_end|>", false, true), (Ids{256, 'x', 257}));
  // Control texts stay text without parse_special; user-defined ones are matched regardless.
  EXPECT_EQ(tok.encode("<|im_end|>", false, false).size(), 10u);
  EXPECT_EQ(tok.encode("a<tool>b", false, false), (Ids{'a', 258, 'b'}));

  EXPECT_TRUE(tok.is_control(257));
  EXPECT_TRUE(tok.is_eog(257));  // <|im_end|>
  EXPECT_TRUE(tok.is_eog(259));  // eos
  EXPECT_EQ(tok.eot_id(), 257);
  EXPECT_FALSE(tok.is_eog(256));
  EXPECT_FALSE(tok.is_eog('a'));
  EXPECT_FALSE(tok.is_eog(-3));
  EXPECT_EQ(tok.token_to_piece(257), "");
  EXPECT_EQ(tok.token_to_piece(258), "<tool>");
  EXPECT_EQ(tok.decode(Ids{256, 'x', 257}), "x");
  EXPECT_EQ(tok.decode(Ids{256, 'x', 257}, /*skip_special=*/false), "<|im_start|>x<|im_end|>");
}

TEST(BpeTokenizer, FimSeparatorAndPadEndGeneration) {
  auto spec = test::bpe_vocab({"<|fim_pad|>", "<|file_sep|>", "<|fim_middle|>"}, {"a b"});
  const Tokenizer tok = make(spec);
  EXPECT_TRUE(tok.is_eog(256));
  EXPECT_TRUE(tok.is_eog(257));
  EXPECT_TRUE(tok.is_control(257));
  EXPECT_FALSE(tok.is_eog(258));
}

TEST(BpeTokenizer, LongestSpecialTokenWins) {
  auto spec = test::bpe_vocab({"<a>", "<a><b>"}, {"a b"});
  spec.types[256] = 3;
  spec.types[257] = 3;
  EXPECT_EQ(make(spec).encode("<a><a><b>", false, true), (Ids{256, 257}));
}

TEST(BpeTokenizer, Llama3StyleAddsBosAndSkipsMergesForWholeWords) {
  // "abc" is a token but no merge builds it: llama3-style vocabularies use it directly.
  auto spec = test::bpe_vocab({"abc", "<|begin_of_text|>"}, {"a b"}, "llama-bpe");
  spec.types[257] = 3;
  spec.extra = [](GgufWriter& w) { w.add_u32("tokenizer.ggml.bos_token_id", 257); };
  const Tokenizer tok = make(spec);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("abc", true, false), (Ids{257, 256}));
  EXPECT_EQ(make(test::bpe_vocab({"abc"}, {"a b"}, "gpt-2")).encode("abc", false, false),
            (Ids{'a', 'b', 'c'}));
}

TEST(Tokenizer, ConcurrentEncodeAndDecode) {
  VELA_REQUIRE_SHARED();
  auto gguf = GgufFile::open(test::shared_path("models/tiny-qwen2-bpe-F16.gguf").string());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::string text =
      "The quick brown fox jumps over the lazy dog. 你好，世界 🦙 1234567";
  const Ids expected = tok->encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      bool all = true;
      for (int i = 0; i < 50; ++i)
        all = all && tok->encode(text, true, true) == expected && tok->decode(expected) == text;
      ok[size_t(t)] = all;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

}  // namespace
}  // namespace vela
