#include "server/tool_formats/harmony_parser.h"

#include <cctype>

#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

using namespace tool_text;

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";

// The word of `header` after `key`, up to a space or the next marker.
std::string word_after(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == npos) return "";
  size_t i = at + key.size(), j = i;
  while (j < header.size() && !std::isspace(static_cast<unsigned char>(header[j])) &&
         header.substr(j, 2) != "<|")
    ++j;
  return std::string(header.substr(i, j - i));
}

void add_text(HarmonyEvent::Type type, std::string_view text, std::vector<HarmonyEvent>& out) {
  if (text.empty()) return;
  if (!out.empty() && out.back().type == type) {
    out.back().text += text;
    return;
  }
  HarmonyEvent e;
  e.type = type;
  e.text = std::string(text);
  out.push_back(std::move(e));
}

}  // namespace

void HarmonySplitter::push(std::string_view text, std::vector<HarmonyEvent>& out) {
  buffer_ += text;
  scan(out, false);
}

void HarmonySplitter::finish(std::vector<HarmonyEvent>& out) {
  scan(out, true);
  if (state_ != State::kOutside) {
    HarmonyEvent e;
    e.type = HarmonyEvent::Type::kEnd;
    out.push_back(std::move(e));
  }
  state_ = State::kOutside;
}

void HarmonySplitter::scan(std::vector<HarmonyEvent>& out, bool at_end) {
  while (true) {
    const std::string_view b = buffer_;
    switch (state_) {
      case State::kOutside: {
        // End markers outside a message (a stray one) are dropped.
        const Found f = find_first(b, {kStart, kChannel, kEnd, kReturn, kCall});
        if (f.pos == npos) {
          const size_t keep = at_end ? 0 : held_suffix(b, {kStart, kChannel, kEnd, kReturn, kCall});
          add_text(HarmonyEvent::Type::kText, b.substr(0, b.size() - keep), out);
          buffer_.erase(0, b.size() - keep);
          return;
        }
        add_text(HarmonyEvent::Type::kText, b.substr(0, f.pos), out);
        if (f.which == 0) {
          buffer_.erase(0, f.pos + kStart.size());
          state_ = State::kHeader;
        } else if (f.which == 1) {
          buffer_.erase(0, f.pos);  // the header starts at the channel
          state_ = State::kHeader;
        } else {
          const std::string_view m = f.which == 2 ? kEnd : f.which == 3 ? kReturn : kCall;
          buffer_.erase(0, f.pos + m.size());
        }
        continue;
      }
      case State::kHeader: {
        const size_t at = b.find(kMessage);
        if (at == npos) {
          if (at_end) {  // a header cut off: nothing of the message came
            buffer_.clear();
            state_ = State::kOutside;
          }
          return;
        }
        const std::string_view header = b.substr(0, at);
        HarmonyEvent e;
        e.type = HarmonyEvent::Type::kHeader;
        e.channel = word_after(header, kChannel);
        e.recipient = word_after(header, "to=");
        out.push_back(std::move(e));
        buffer_.erase(0, at + kMessage.size());
        state_ = State::kBody;
        continue;
      }
      case State::kBody: {
        // A new header without an end marker also ends the message.
        const Found f = find_first(b, {kEnd, kReturn, kCall, kStart, kChannel});
        if (f.pos == npos) {
          const size_t keep = at_end ? 0 : held_suffix(b, {kEnd, kReturn, kCall, kStart, kChannel});
          add_text(HarmonyEvent::Type::kBody, b.substr(0, b.size() - keep), out);
          buffer_.erase(0, b.size() - keep);
          return;
        }
        add_text(HarmonyEvent::Type::kBody, b.substr(0, f.pos), out);
        HarmonyEvent e;
        e.type = HarmonyEvent::Type::kEnd;
        if (f.which < 3) {
          const std::string_view m = f.which == 0 ? kEnd : f.which == 1 ? kReturn : kCall;
          e.text = std::string(m);
          buffer_.erase(0, f.pos + m.size());
        } else {
          buffer_.erase(0, f.pos);
        }
        out.push_back(std::move(e));
        state_ = State::kOutside;
        continue;
      }
    }
  }
}

}  // namespace vela::server
