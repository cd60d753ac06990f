// Prompt lookup: longest suffix first, most recent occurrence, continuation bounded by the
// sequence and the output, nothing when no suffix repeats.
#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <vector>

#include "spec/speculative_config.h"

namespace vela {
namespace {

std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int32_t min_n, int32_t max_n,
                             size_t k) {
  std::vector<int32_t> out(k, -1);
  out.resize(size_t(propose_ngram(tokens, min_n, max_n, out)));
  return out;
}

TEST(NgramProposer, ContinuesTheMostRecentEarlierOccurrence) {
  // Suffix [7, 8] occurs at 0 (followed by 1 2 3) and at 4 (followed by 5 6).
  const std::vector<int32_t> t = {7, 8, 1, 2, 7, 8, 5, 6, 9, 7, 8};
  EXPECT_EQ(propose(t, 1, 2, 3), (std::vector<int32_t>{5, 6, 9}));
  EXPECT_EQ(propose(t, 1, 2, 1), (std::vector<int32_t>{5}));
}

TEST(NgramProposer, LongerMatchesWin) {
  // Suffix [3, 4]: the 2-gram occurs once (then 9); the 1-gram [4] more recently (then 5).
  const std::vector<int32_t> t = {3, 4, 9, 9, 4, 5, 3, 4};
  EXPECT_EQ(propose(t, 1, 2, 2), (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(propose(t, 1, 1, 2), (std::vector<int32_t>{5, 3}));
}

TEST(NgramProposer, ContinuationMayRunIntoTheSuffix) {
  // A loop: the proposal repeats it, but never past the end of the sequence.
  const std::vector<int32_t> t = {1, 2, 1, 2, 1, 2};
  EXPECT_EQ(propose(t, 2, 2, 8), (std::vector<int32_t>{1, 2}));
}

TEST(NgramProposer, NothingWithoutARepeat) {
  EXPECT_TRUE(propose({1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(propose({5}, 1, 3, 4).empty());
  EXPECT_TRUE(propose({}, 1, 3, 4).empty());
  EXPECT_TRUE(propose({1, 2, 1, 2}, 3, 3, 4).empty());  // min_n longer than any repeat
  EXPECT_TRUE(propose({1, 1}, 1, 1, 0).empty());
}

TEST(SpeculativeConfig, RangesAreChecked) {
  SpeculativeConfig c;
  c.method = SpecMethod::kNgram;
  EXPECT_TRUE(validate(c).ok());
  c.num_speculative_tokens = 0;
  EXPECT_NE(validate(c).message().find("number of speculative tokens"), std::string::npos);
  c.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  EXPECT_FALSE(validate(c).ok());
  c.num_speculative_tokens = 4;
  c.prompt_lookup_min = 3;
  c.prompt_lookup_max = 2;
  EXPECT_NE(validate(c).message().find("prompt-lookup-max"), std::string::npos);
  c.prompt_lookup_min = 0;
  EXPECT_NE(validate(c).message().find("prompt-lookup-min"), std::string::npos);
  c.prompt_lookup_min = 1;
  c.draft_vocab = 4096;  // the MTP block's alone
  EXPECT_NE(validate(c).message().find("applies to the mtp method"), std::string::npos);
  c.method = SpecMethod::kMtp;
  EXPECT_TRUE(validate(c).ok());
  c.draft_vocab = -1;
  EXPECT_NE(validate(c).message().find("speculative-draft-vocab"), std::string::npos);
  c.method = SpecMethod::kNone;  // off: nothing else matters
  EXPECT_TRUE(validate(c).ok());
}

TEST(SpeculativeConfig, MethodNames) {
  EXPECT_EQ(*parse_spec_method("ngram"), SpecMethod::kNgram);
  EXPECT_EQ(*parse_spec_method("none"), SpecMethod::kNone);
  EXPECT_EQ(*parse_spec_method("draft"), SpecMethod::kDraft);
  EXPECT_NE(parse_spec_method("eagle").message().find("unknown speculative method 'eagle'"),
            std::string::npos);
}

}  // namespace
}  // namespace vela
