// The public API: render_chat's variables, error messages, options, copies and concurrent use.
#include <gtest/gtest.h>

#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "template/chat_template.h"
#include "template_test_util.h"

namespace vela {
namespace {

using nlohmann::ordered_json;
using test::render;

const char* kChatMl =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    "{% if tools %}[{{ tools|length }} tools]{% endif %}{{ eos_token if not add_generation_prompt "
    "}}";

ordered_json two_messages() {
  return ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 🦙"}])");
}

TEST(ChatTemplateApi, RenderChatSetsTheStandardVariables) {
  auto t = ChatTemplate::parse(kChatMl);
  ASSERT_TRUE(t.ok()) << t.message();
  auto out = render_chat(*t, two_messages(), true, "<s>", "</s>");
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(*out,
            "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi 🦙<|im_end|>\n"
            "<|im_start|>assistant\n");
  out = render_chat(*t, two_messages(), false, "", "</s>");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->substr(out->size() - 4), "</s>");
}

TEST(ChatTemplateApi, ExtraVariablesAreAddedAndWin) {
  auto t = ChatTemplate::parse(kChatMl);
  ASSERT_TRUE(t.ok());
  const ordered_json extra = {{"tools", ordered_json::array({{{"name", "a"}}, {{"name", "b"}}})},
                              {"bos_token", "[BOS]"}};
  auto out = render_chat(*t, ordered_json::array(), true, "<s>", "</s>", extra);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(*out, "[BOS]<|im_start|>assistant\n[2 tools]");
  EXPECT_FALSE(render_chat(*t, ordered_json::array(), true, "", "", ordered_json(3)).ok());
}

TEST(ChatTemplateApi, RaiseExceptionMessageIsExact) {
  auto t = ChatTemplate::parse(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}ok");
  ASSERT_TRUE(t.ok());
  auto out = render_chat(*t, two_messages(), true, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.message(), "System role not supported");
}

TEST(ChatTemplateApi, ErrorsNameTheLine) {
  const std::string syntax = render("line 1\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  EXPECT_EQ(syntax.rfind("ERROR: syntax error (line 3): ", 0), 0u) << syntax;
  const std::string runtime = render("a\nb\n{{ missing.attribute }}");
  EXPECT_EQ(runtime, "ERROR: chat template error (line 3): 'missing' is undefined");
  EXPECT_EQ(render("{{ {}.a.b }}"),
            "ERROR: chat template error (line 1): 'dict object' has no attribute 'a'");
  EXPECT_EQ(render("{{ [1][5].x }}"),
            "ERROR: chat template error (line 1): list object has no element 5");
  EXPECT_EQ(render("{{ 'a' + 1 }}"),
            "ERROR: chat template error (line 1): can only concatenate str (not \"int\") to str");
}

TEST(ChatTemplateApi, UndefinedBehavesLikeJinja) {
  EXPECT_EQ(render("[{{ x }}][{{ x is defined }}][{{ x|default('d') }}][{{ x|length }}]"),
            "[][False][d][0]");
  EXPECT_EQ(render("{% for i in x %}no{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("[{{ m.nope }}][{{ m['nope'] }}][{{ m.nope is defined }}]", {{"m", {{"a", 1}}}}),
            "[][][False]");
  EXPECT_EQ(render("{{ x + 1 }}"), "ERROR: chat template error (line 1): 'x' is undefined");
}

TEST(ChatTemplateApi, StrftimeNowUsesTheGivenClockOrNow) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
  auto t = ChatTemplate::parse("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->render(ordered_json::object());
  ASSERT_TRUE(out.ok());
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  EXPECT_EQ(*out, std::to_string(tm.tm_year + 1900));
}

TEST(ChatTemplateApi, ContextMustBeAnObject) {
  auto t = ChatTemplate::parse("x{{ y }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(ordered_json::array()).ok());
  EXPECT_FALSE(t->render(ordered_json("str")).ok());
  auto out = t->render(ordered_json());  // null: no variables
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "x");
}

TEST(ChatTemplateApi, OutputLimitIsAnError) {
  ChatTemplateOptions o = test::fixed_clock();
  o.max_output_bytes = 10;
  EXPECT_EQ(render("0123456789", ordered_json::object(), o), "0123456789");
  const std::string out = render("0123456789x", ordered_json::object(), o);
  EXPECT_NE(out.find("output exceeds"), std::string::npos) << out;
}

TEST(ChatTemplateApi, CopiesShareTheParsedTemplateAndRenderConcurrently) {
  auto parsed = ChatTemplate::parse(kChatMl);
  ASSERT_TRUE(parsed.ok());
  const ChatTemplate copy = *parsed;
  EXPECT_EQ(copy.source(), kChatMl);
  const ordered_json msgs = two_messages();
  const std::string expected = *render_chat(copy, msgs, true, "<s>", "</s>");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto out = render_chat(copy, msgs, true, "<s>", "</s>");
        mismatches[t] += !out.ok() || *out != expected;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(ChatTemplateApi, ScopingFollowsJinja) {
  // A loop body's `set` stays in the loop; a namespace carries state out.
  EXPECT_EQ(render("{% set n = 0 %}{% for i in range(3) %}{% set n = n + 1 %}{% endfor %}{{ n }}"),
            "0");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + 1 %}"
                   "{% endfor %}{{ ns.n }}"),
            "3");
  // `if` does not open a scope.
  EXPECT_EQ(render("{% if true %}{% set x = 1 %}{% endif %}{{ x }}"), "1");
  // Macros see the variables of the scope they were defined in, at call time.
  EXPECT_EQ(render("{% macro m() %}{{ v }}{% endmacro %}{% set v = 'late' %}{{ m() }}"), "late");
}

}  // namespace
}  // namespace vela
