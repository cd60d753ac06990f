#pragma once
// gpt-oss's harmony format, split into its messages as the text arrives. An assistant turn is
// a run of messages, each `<|start|>assistant` (written by the prompt for the first one), an
// optional ` to=RECIPIENT`, `<|channel|>CHANNEL`, more header words (` <|constrain|>json`),
// `<|message|>`, the body, and `<|end|>`, `<|return|>` or `<|call|>`. The recipient may also
// follow the channel (`<|channel|>commentary to=functions.NAME`). Text outside any message is
// passed on as such. Markers split across pieces are held back until known; bodies stream.
// Used by the gpt_oss reasoning parser (analysis is reasoning) and tool-call parser
// (commentary to=functions.NAME is a call).
// Thread-safety: none; one splitter per generated sequence.
#include <string>
#include <string_view>
#include <vector>

namespace vela::server {

struct HarmonyEvent {
  enum class Type {
    kText,    // text outside any message
    kHeader,  // a message begins: channel and recipient are set
    kBody,    // a piece of the current message's body
    kEnd,     // the current message ends (also when the output stops inside it)
  };
  Type type = Type::kText;
  std::string text;       // kText, kBody; kEnd: the end marker ("" when none came)
  std::string channel;    // kHeader: "analysis", "final", "commentary", ...
  std::string recipient;  // kHeader: "functions.NAME", or "" when none
};

class HarmonySplitter {
 public:
  void push(std::string_view text, std::vector<HarmonyEvent>& out);
  // End of the output: what was held back goes out, and an open message ends.
  void finish(std::vector<HarmonyEvent>& out);

 private:
  enum class State { kOutside, kHeader, kBody };
  void scan(std::vector<HarmonyEvent>& out, bool at_end);

  State state_ = State::kOutside;
  std::string buffer_;  // text not yet consumed
};

}  // namespace vela::server
