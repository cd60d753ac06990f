// Penalties change exactly the logits vLLM's formulas say, and nothing else.
#include "sampling/penalty_tracker.h"

#include <gtest/gtest.h>

#include <vector>

namespace vela::sampling {
namespace {

TEST(PenaltyTracker, AppliesRepetitionThenFrequencyAndPresence) {
  PenaltyTracker tracker(/*repetition=*/2.0f, /*presence=*/0.5f, /*frequency=*/0.25f);
  ASSERT_TRUE(tracker.enabled());
  const std::vector<int32_t> prompt = {0, 1};
  tracker.set_prompt(prompt);
  for (const int32_t token : {2, 2, 3}) tracker.add_output(token);

  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  tracker.apply(logits);
  // Hand-computed:
  //   0: prompt, 2.0 > 0 -> 2.0 / 2 = 1.0
  //   1: prompt, -1.0 <= 0 -> -1.0 * 2 = -2.0
  //   2: output x2: 0.5 / 2 = 0.25, - 0.25 * 2 - 0.5 = -0.75
  //   3: output x1: 3.0 / 2 = 1.5, - 0.25 * 1 - 0.5 = 0.75
  //   4: unseen: -2.0
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f);
  EXPECT_FLOAT_EQ(logits[2], -0.75f);
  EXPECT_FLOAT_EQ(logits[3], 0.75f);
  EXPECT_FLOAT_EQ(logits[4], -2.0f);
}

TEST(PenaltyTracker, PresenceAndFrequencyIgnorePromptTokens) {
  PenaltyTracker tracker(1.0f, 1.0f, 1.0f);
  const std::vector<int32_t> prompt = {0, 1};
  tracker.set_prompt(prompt);
  tracker.add_output(1);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  tracker.apply(logits);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);   // prompt only: untouched
  EXPECT_FLOAT_EQ(logits[1], -1.0f);  // 1 - 1 * 1 - 1
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
}

TEST(PenaltyTracker, RepetitionAppliesOnceRegardlessOfCount) {
  PenaltyTracker tracker(4.0f, 0.0f, 0.0f);
  for (int i = 0; i < 5; ++i) tracker.add_output(0);
  std::vector<float> logits = {8.0f, -8.0f};
  tracker.apply(logits);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], -8.0f);
}

TEST(PenaltyTracker, ApplyDoesNotAccumulate) {
  PenaltyTracker tracker(1.0f, 0.5f, 0.0f);
  tracker.add_output(0);
  std::vector<float> a = {1.0f};
  std::vector<float> b = {1.0f};
  tracker.apply(a);
  tracker.apply(b);
  EXPECT_FLOAT_EQ(a[0], 0.5f);
  EXPECT_FLOAT_EQ(b[0], 0.5f);
}

TEST(PenaltyTracker, SetPromptReplacesPreviousPrompt) {
  PenaltyTracker tracker(2.0f, 0.0f, 0.0f);
  const std::vector<int32_t> first = {0};
  const std::vector<int32_t> second = {1};
  tracker.set_prompt(first);
  tracker.set_prompt(second);
  std::vector<float> logits = {2.0f, 2.0f};
  tracker.apply(logits);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f);
}

TEST(PenaltyTracker, NeutralPenaltiesAreDisabled) {
  PenaltyTracker tracker(1.0f, 0.0f, 0.0f);
  EXPECT_FALSE(tracker.enabled());
  tracker.add_output(0);
  std::vector<float> logits = {3.0f};
  tracker.apply(logits);
  EXPECT_FLOAT_EQ(logits[0], 3.0f);
}

TEST(PenaltyTracker, OutOfRangeTokensAreIgnored) {
  PenaltyTracker tracker(2.0f, 1.0f, 1.0f);
  tracker.add_output(-1);
  tracker.add_output(10);
  std::vector<float> logits = {1.0f, 1.0f};
  tracker.apply(logits);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f);
}

}  // namespace
}  // namespace vela::sampling
