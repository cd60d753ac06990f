// StopMatcher: stop strings across pushes, held-back text, false alarms, overlaps, UTF-8.
#include "sampling/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace vela {
namespace {

// Pushes `pieces` in order and returns everything emitted (including the final flush).
std::string run(StopMatcher& matcher, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& piece : pieces) out += matcher.push(piece);
  out += matcher.flush();
  return out;
}

TEST(StopMatcher, NoStopStringsPassesThrough) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.push("hello "), "hello ");
  EXPECT_EQ(matcher.push("world"), "world");
  EXPECT_EQ(matcher.flush(), "");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, StopStringSplitAcrossPushes) {
  StopMatcher matcher({"###"});
  EXPECT_EQ(matcher.push("Hello #"), "Hello ");
  EXPECT_EQ(matcher.held_back(), 1u);
  EXPECT_EQ(matcher.push("#"), "");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("# world"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "###");
  // Nothing after the stop is ever emitted.
  EXPECT_EQ(matcher.push("more"), "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, StopStringInsideOnePush) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("abcSTOPdef"), "abc");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "STOP");
}

TEST(StopMatcher, StopAtVeryStart) {
  StopMatcher matcher({"</s>"});
  EXPECT_EQ(matcher.push("</"), "");
  EXPECT_EQ(matcher.push("s>"), "");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcher, HeldBackTextReleasedOnFlush) {
  StopMatcher matcher({"###"});
  EXPECT_EQ(matcher.push("abc##"), "abc");
  EXPECT_EQ(matcher.flush(), "##");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.held_back(), 0u);
}

TEST(StopMatcher, PartialPrefixFalseAlarmIsReleased) {
  StopMatcher matcher({"###"});
  EXPECT_EQ(matcher.push("a#"), "a");
  EXPECT_EQ(matcher.push("#b"), "##b");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, FalseAlarmOverlappingARealMatch) {
  // "aa" is held, "aaa" releases one 'a' but keeps "aa" (still a prefix), then "aab" stops.
  StopMatcher matcher({"aab"});
  EXPECT_EQ(matcher.push("aa"), "");
  EXPECT_EQ(matcher.push("a"), "a");
  EXPECT_EQ(matcher.push("b"), "");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcher, EarliestCompletingStopWins) {
  // "lo w" completes (at byte 8) before "world" (byte 11).
  StopMatcher matcher({"world", "lo w"});
  EXPECT_EQ(run(matcher, {"hello world"}), "hel");
  EXPECT_EQ(matcher.matched(), "lo w");
}

TEST(StopMatcher, CompletionOrderBeatsStartOrder) {
  // "abcd" starts first but "bc" is complete one byte earlier: a token-by-token check would
  // already have stopped there, so the one-shot push must agree.
  StopMatcher matcher({"abcd", "bc"});
  EXPECT_EQ(run(matcher, {"xabcd"}), "xa");
  EXPECT_EQ(matcher.matched(), "bc");
}

TEST(StopMatcher, SameEndPrefersEarlierStart) {
  StopMatcher matcher({"bc", "abc"});
  EXPECT_EQ(run(matcher, {"xab", "c"}), "x");
  EXPECT_EQ(matcher.matched(), "abc");
}

TEST(StopMatcher, HoldsLongestPossiblePrefixAcrossSeveralStops) {
  StopMatcher matcher({"xyz", "yzw"});
  EXPECT_EQ(matcher.push("axy"), "a");  // "xy" could start "xyz"
  EXPECT_EQ(matcher.push("zz"), "");
  EXPECT_EQ(matcher.matched(), "xyz");
}

TEST(StopMatcher, ResultDoesNotDependOnHowTextIsSplit) {
  const std::vector<std::string> stops = {"<|end|>", "\n\nUser:", "end", "ndx", "wxyz", "xy"};
  const std::vector<std::string> texts = {"The answer is 42.\n\nUser: next",
                                          "no stops in here at all <|en",
                                          "we spend time",
                                          "an <|end| almost <|end|> done",
                                          "sendx",
                                          "\n\nUser",
                                          "vwxyz"};
  std::mt19937 rng(17);
  for (const std::string& text : texts) {
    StopMatcher whole(stops);
    const std::string expected = run(whole, {text});
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<std::string> pieces;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = std::min<size_t>(text.size() - pos, 1 + rng() % 4);
        pieces.push_back(text.substr(pos, len));
        pos += len;
      }
      StopMatcher split(stops);
      EXPECT_EQ(run(split, pieces), expected) << text;
      EXPECT_EQ(split.stopped(), whole.stopped()) << text;
      EXPECT_EQ(split.matched(), whole.matched()) << text;
    }
  }
}

TEST(StopMatcher, Utf8StopStringSplitMidCharacter) {
  // "。" is E3 80 82; the tokenizer may hand it over a byte at a time.
  StopMatcher matcher({"。"});
  EXPECT_EQ(matcher.push("你好"), "你好");
  EXPECT_EQ(matcher.push("\xE3\x80"), "");
  EXPECT_EQ(matcher.push("\x82再见"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "。");
}

TEST(StopMatcher, Utf8SharedLeadBytesAreAFalseAlarm) {
  // "、" (E3 80 81) shares its first two bytes with "。" (E3 80 82).
  StopMatcher matcher({"。"});
  EXPECT_EQ(matcher.push("a\xE3\x80"), "a");
  EXPECT_EQ(matcher.push("\x81"
                         "b"),
            "、b");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, Utf8MultiCharacterStop) {
  StopMatcher matcher({"ありがとう", "🛑"});
  EXPECT_EQ(run(matcher, {"はい、あり", "がと", "うございます"}), "はい、");
  EXPECT_EQ(matcher.matched(), "ありがとう");
  StopMatcher emoji({"ありがとう", "🛑"});
  EXPECT_EQ(run(emoji, {"go \xF0\x9F", "\x9B\x91 x"}), "go ");
  EXPECT_EQ(emoji.matched(), "🛑");
}

TEST(StopMatcher, EmptyPushAndEmptyStopStrings) {
  StopMatcher matcher({"", "zz"});
  EXPECT_EQ(matcher.push(""), "");
  EXPECT_EQ(matcher.push("abc"), "abc");
  EXPECT_FALSE(matcher.stopped());
}

}  // namespace
}  // namespace vela
