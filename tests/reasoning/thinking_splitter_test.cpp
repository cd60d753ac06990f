// The reasoning splitter: whole and piece by piece (every split point, so markers split across
// pieces), the prompt's tail deciding where the output begins, unterminated blocks.
#include <gtest/gtest.h>

#include "reasoning/thinking_splitter.h"

namespace vela::reasoning {
namespace {

const ThinkingMarkers kThink{"<think>", "</think>", false};
const ThinkingMarkers kImplicit{"<think>", "</think>", true};

struct Out {
  std::string reasoning, content;
  bool operator==(const Out&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Out& o) {
  return os << "{reasoning: \"" << o.reasoning << "\", content: \"" << o.content << "\"}";
}

Out run(const ThinkingMarkers& m, Phase initial, std::string_view text, size_t step) {
  ThinkingSplitter s(m, initial);
  Out o;
  for (size_t i = 0; i < text.size(); i += step)
    s.push(text.substr(i, step), o.reasoning, o.content);
  s.finish(o.reasoning, o.content);
  return o;
}

// Every piece size gives the same result as the whole text.
void expect_split(const ThinkingMarkers& m, Phase initial, std::string_view text, const Out& want) {
  for (size_t step = 1; step <= text.size() + 1; ++step)
    EXPECT_EQ(run(m, initial, text, step), want) << "step " << step << " text " << text;
}

TEST(ThinkingSplitter, BlockThenAnswer) {
  expect_split(kThink, Phase::kBefore, "<think>\nWeigh it.\n</think>\n\nThe answer.",
               {"\nWeigh it.\n", "The answer."});
  expect_split(kThink, Phase::kBefore, "  <think>a</think>b", {"a", "b"});
}

TEST(ThinkingSplitter, NoBlockIsAllContent) {
  expect_split(kThink, Phase::kBefore, "Just an answer.", {"", "Just an answer."});
  expect_split(kThink, Phase::kBefore, "<thin ice>", {"", "<thin ice>"});
  expect_split(kThink, Phase::kBefore, "<thi", {"", "<thi"});  // ends while it could be one
  expect_split(kThink, Phase::kBefore, "", {"", ""});
}

TEST(ThinkingSplitter, PromptOpenedTheBlock) {
  expect_split(kThink, Phase::kThinking, "Hmm.\n</think>\n\nYes.", {"Hmm.\n", "Yes."});
  // A start marker repeated by the model is dropped.
  expect_split(kThink, Phase::kThinking, "<think>Hmm.</think>Yes.", {"Hmm.", "Yes."});
}

TEST(ThinkingSplitter, UnterminatedBlockIsAllReasoning) {
  expect_split(kThink, Phase::kThinking, "still thinking </thi", {"still thinking </thi", ""});
  expect_split(kThink, Phase::kBefore, "<think>and thinking", {"and thinking", ""});
}

TEST(ThinkingSplitter, ImplicitStart) {
  expect_split(kImplicit, Phase::kThinking, "no marker</think>Answer", {"no marker", "Answer"});
  expect_split(kImplicit, Phase::kThinking, "<think>marker</think>Answer", {"marker", "Answer"});
  expect_split(kImplicit, Phase::kThinking, "never ends", {"never ends", ""});
}

TEST(ThinkingSplitter, AnswerFromThePrompt) {
  expect_split(kThink, Phase::kAnswer, "<think>x</think>y", {"", "<think>x</think>y"});
}

TEST(ThinkingSplitter, MarkersInsideTheAnswerStayContent) {
  expect_split(kThink, Phase::kBefore, "<think>r</think>a </think> b <think>",
               {"r", "a </think> b <think>"});
}

TEST(ThinkingSplitter, MultibyteText) {
  expect_split(kThink, Phase::kBefore, "<think>思考</think>答え", {"思考", "答え"});
}

TEST(ThinkingSplitter, InitialPhaseFromThePrompt) {
  EXPECT_EQ(initial_phase(kThink, "<|im_start|>assistant\n<think>\n"), Phase::kThinking);
  EXPECT_EQ(initial_phase(kThink, "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            Phase::kAnswer);
  EXPECT_EQ(initial_phase(kThink, "<｜Assistant｜><think></think>"), Phase::kAnswer);
  EXPECT_EQ(initial_phase(kThink, "<|im_start|>assistant\n"), Phase::kBefore);
  EXPECT_EQ(initial_phase(kImplicit, "<｜Assistant｜>"), Phase::kThinking);
}

}  // namespace
}  // namespace vela::reasoning
