#pragma once
// Test helper: the records of a named server-sent-event stream ("event: NAME\ndata: JSON\n\n", as
// the Responses and Anthropic dialects write them), each checked for its shape and for its data's
// "type" repeating its name. Failures are reported through gtest.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vela::test {

struct NamedEvent {
  std::string name;
  nlohmann::json data;
};

inline std::vector<NamedEvent> parse_named_events(const std::string& text) {
  std::vector<NamedEvent> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated record: " << text.substr(pos);
      break;
    }
    const std::string record = text.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = record.find('\n');
    if (record.rfind("event: ", 0) != 0 || nl == std::string::npos ||
        record.compare(nl + 1, 6, "data: ") != 0) {
      ADD_FAILURE() << "not an event/data record: " << record;
      break;
    }
    NamedEvent e{record.substr(7, nl - 7),
                 nlohmann::json::parse(record.substr(nl + 7), nullptr, /*allow_exceptions=*/false)};
    EXPECT_FALSE(e.data.is_discarded()) << "data is not JSON: " << record;
    EXPECT_TRUE(e.data.is_object() && e.data.value("type", "") == e.name) << record;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace vela::test
