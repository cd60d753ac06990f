#pragma once
// Helpers shared by the template tests: a fixed clock (strftime_now gives 26 Jul 2024, as in
// the reference renders) and one-call rendering.
#include <ctime>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/chat_template.h"

namespace vela::test {

// 2024-07-26 12:00 local time: the date the reference renders used for strftime_now.
inline ChatTemplateOptions fixed_clock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  ChatTemplateOptions o;
  o.now = std::chrono::system_clock::from_time_t(std::mktime(&tm));
  return o;
}

// Parses and renders; a failure at either stage returns "ERROR: <message>".
inline std::string render(std::string_view source,
                          const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                          ChatTemplateOptions options = fixed_clock()) {
  auto t = ChatTemplate::parse(source);
  if (!t.ok()) return "ERROR: " + t.message();
  auto out = t->render(context, options);
  if (!out.ok()) return "ERROR: " + out.message();
  return *out;
}

}  // namespace vela::test
