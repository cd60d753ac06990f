#pragma once
// Splits generated text into a reasoning block and the answer after it, for models that think
// between two markers (`<think>` ... `</think>`, gpt-oss's harmony channel headers). The text
// arrives in pieces of any size; a marker split across pieces is found all the same, and text
// that may still be the start of a marker is held back until it is known.
// Thread-safety: none; one splitter per generated sequence.
#include <string>
#include <string_view>

namespace vela::reasoning {

enum class Phase {
  kBefore,    // nothing decisive yet: the output may open a block with the start marker
  kThinking,  // inside the block
  kAnswer,    // after the block (or there is none)
};

struct ThinkingMarkers {
  std::string start;  // "<think>"
  std::string end;    // "</think>"
  // The model may think without writing the start marker (DeepSeek-R1): an output that does
  // not open with it is reasoning all the same, up to the end marker.
  bool implicit_start = false;
};

// Where a sequence begins, from the prompt's text: a prompt that ends with the start marker
// (the template opened the block, as Qwen3.5 and DeepSeek-V3.1 do when thinking is on) begins
// inside it; one that ends with the end marker (thinking turned off: `<think></think>`) begins
// in the answer; otherwise the output decides (or, with implicit_start, begins inside).
Phase initial_phase(const ThinkingMarkers& markers, std::string_view prompt);

class ThinkingSplitter {
 public:
  ThinkingSplitter(ThinkingMarkers markers, Phase initial);

  // Appends to `reasoning` and `content` the text that `text` makes certain.
  void push(std::string_view text, std::string& reasoning, std::string& content);
  // End of the output: what was held back goes where it stands (an unterminated block is all
  // reasoning).
  void finish(std::string& reasoning, std::string& content);

  Phase phase() const { return phase_; }

 private:
  void scan(std::string& reasoning, std::string& content, bool at_end);

  ThinkingMarkers markers_;
  Phase phase_;
  std::string held_;          // text not yet assigned
  bool skip_start_ = false;   // inside from the prompt: a repeated start marker is dropped
  bool answer_start_ = true;  // the answer's leading whitespace is still being dropped
};

}  // namespace vela::reasoning
