// Every case in ../shared/chat-templates/cases.jsonl: real models' chat templates rendered by
// Python Jinja2 (the way model hubs configure it) must render byte for byte, or fail with the
// expected raise_exception message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/shared_data.h"
#include "template/chat_template.h"
#include "template_test_util.h"

namespace vela {
namespace {

TEST(ChatTemplateConformance, AllSharedCasesRenderExactly) {
  VELA_REQUIRE_SHARED();
  const auto path = test::shared_path("chat-templates/cases.jsonl");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "chat-templates/cases.jsonl not present";
  std::ifstream in(path);
  std::string line;
  int cases = 0, passed = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto c = nlohmann::ordered_json::parse(line);
    ++cases;
    const std::string name = c["name"].get<std::string>() + " #" + std::to_string(cases);
    auto tmpl = ChatTemplate::parse(c["template"].get<std::string>());
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.message();
    auto out = render_chat(*tmpl, c["messages"], c["add_generation_prompt"].get<bool>(),
                           c["bos_token"].get<std::string>(), c["eos_token"].get<std::string>(),
                           nlohmann::ordered_json(), test::fixed_clock());
    if (c.contains("expected_error")) {
      ASSERT_FALSE(out.ok()) << name << " rendered instead of failing";
      EXPECT_EQ(out.message(), c["expected_error"].get<std::string>()) << name;
      passed += !out.ok() && out.message() == c["expected_error"].get<std::string>();
    } else {
      ASSERT_TRUE(out.ok()) << name << ": " << out.message();
      EXPECT_EQ(*out, c["expected"].get<std::string>()) << name;
      passed += *out == c["expected"].get<std::string>();
    }
  }
  EXPECT_EQ(cases, 126);
  EXPECT_EQ(passed, cases);
}

}  // namespace
}  // namespace vela
