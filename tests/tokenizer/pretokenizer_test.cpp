// Pre-tokenizer regex splits for the named kinds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace vela {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre, std::string_view text) {
  auto p = Pretokenizer::create(pre);
  EXPECT_TRUE(p.ok()) << p.message();
  if (!p.ok()) return {};
  std::vector<std::string_view> views;
  p->split(text, views);
  return Words(views.begin(), views.end());
}

TEST(Pretokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's  3.14\n"),
            (Words{"Hello", " world", "'s", " ", " 3", ".", "14", "\n"}));
  EXPECT_EQ(split("gpt2", "a\tb"), (Words{"a", "\t", "b"}));
}

TEST(Pretokenizer, Llama3GroupsDigitsByThreeAndKeepsNewlineRuns) {
  EXPECT_EQ(split("llama3", "Hello world 12345\n\n"),
            (Words{"Hello", " world", " ", "123", "45", "\n\n"}));
  EXPECT_EQ(split("llama-bpe", "I'M ok"), (Words{"I", "'M", " ok"}));
}

TEST(Pretokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "x123"), (Words{"x", "1", "2", "3"}));
}

TEST(Pretokenizer, MultiRegexListsKeepGaps) {
  // default: punctuation runs first, then GPT-2 words, digit runs, triples of ASCII digits.
  EXPECT_EQ(split("default", "hi!! 12345"), (Words{"hi", "!!", " ", "123", "45"}));
  EXPECT_EQ(split("starcoder", "ab 12"), (Words{"ab", " ", "1", "2"}));
  EXPECT_EQ(split("deepseek-coder", "a\nb"), (Words{"a", "\n", "b"}));
}

TEST(Pretokenizer, WhiteSpaceIsTheUnicodeSet) {
  // U+0085 (NEL) is White_Space (as in HF tokenizers), though PCRE2's own \s leaves it out.
  EXPECT_EQ(split("gpt2",
                  "a\xC2\x85\xC2\x85"
                  "b"),
            (Words{"a", "\xC2\x85", "\xC2\x85", "b"}));
  EXPECT_EQ(split("gpt2",
                  "a\xE3\x80\x80"
                  "b"),
            (Words{"a", "\xE3\x80\x80", "b"}));  // U+3000
}

TEST(Pretokenizer, InvalidUtf8IsKeptInTheWords) {
  const std::string text = "ab\xFF\xFE cd\xC3";
  std::string joined;
  for (const auto& w : split("llama3", text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(Pretokenizer, EveryNamedKindCompiles) {
  std::string names = Pretokenizer::supported_names();
  size_t pos = 0;
  int count = 0;
  while (pos < names.size()) {
    size_t comma = names.find(", ", pos);
    if (comma == std::string::npos) comma = names.size();
    const std::string name = names.substr(pos, comma - pos);
    auto p = Pretokenizer::create(name);
    EXPECT_TRUE(p.ok()) << name << ": " << (p.ok() ? "" : p.message());
    pos = comma + 2;
    ++count;
  }
  EXPECT_GT(count, 10);
}

TEST(Pretokenizer, UnknownNameIsAnError) {
  auto p = Pretokenizer::create("bogus");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("supported: default"), std::string::npos) << p.message();
}

}  // namespace
}  // namespace vela
