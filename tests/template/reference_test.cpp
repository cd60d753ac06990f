// Replays reference_cases.json: templates exercising the language (whitespace control,
// literals, operators, scoping, macros, loops, tests, filters, methods, errors, tool-calling
// chat templates) with the output Python Jinja2 gave for them (see make_reference.py).
// Expected errors must be errors; raise_exception messages must match exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "template/chat_template.h"
#include "template_test_util.h"

namespace vela {
namespace {

nlohmann::ordered_json load_cases() {
  std::ifstream in(std::string(VELA_TEMPLATE_TEST_DIR) + "/reference_cases.json");
  if (!in) return nlohmann::ordered_json::array();
  return nlohmann::ordered_json::parse(in);
}

TEST(ChatTemplateReference, MatchesJinja2) {
  const auto cases = load_cases();
  ASSERT_GT(cases.size(), 150u) << "reference_cases.json missing or short";
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    auto tmpl = ChatTemplate::parse(c["template"].get<std::string>());
    Result<std::string> out = tmpl.ok() ? tmpl->render(c["context"], test::fixed_clock())
                                        : Result<std::string>(tmpl.error());
    if (c.contains("expected")) {
      ASSERT_TRUE(out.ok()) << name << ": " << out.message();
      EXPECT_EQ(*out, c["expected"].get<std::string>()) << name;
    } else {
      EXPECT_FALSE(out.ok()) << name << " rendered: " << *out;
      if (!out.ok() && c["error_type"] == "TemplateError") {
        EXPECT_EQ(out.message(), c["expected_error"].get<std::string>()) << name;
      }
    }
  }
}

}  // namespace
}  // namespace vela
