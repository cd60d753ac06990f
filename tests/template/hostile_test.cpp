// Hostile and broken templates: every one must end in an error (or a bounded render), never a
// crash, a hang or unbounded memory. Limits are lowered where that keeps the test fast.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "template/chat_template.h"
#include "template_test_util.h"

namespace vela {
namespace {

using test::render;

bool is_error(const std::string& s) {
  return s.rfind("ERROR: ", 0) == 0;
}

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

ChatTemplateOptions small_budget() {
  ChatTemplateOptions o = test::fixed_clock();
  o.max_steps = 200'000;
  o.max_output_bytes = 1 << 20;
  o.max_items = 100'000;
  return o;
}

TEST(ChatTemplateHostile, UnterminatedConstructsAreSyntaxErrors) {
  for (const char* src : {"{{ x",
                          "{{ x }",
                          "{% if x %}",
                          "{% if x",
                          "{# comment",
                          "{% raw %}abc",
                          "{% for x in y %}",
                          "{% macro m() %}",
                          "{{ 'abc }}",
                          "{{ (1 }}",
                          "{{ [1, 2 }}",
                          "{{ {'a': 1 }}",
                          "{% endif %}",
                          "{% else %}",
                          "{% set %}",
                          "{% set x = %}",
                          "{{ }}",
                          "{% %}",
                          "{{ 1 + }}",
                          "{% for in x %}{% endfor %}",
                          "{% if true %}{% endfor %}",
                          "{{ x | }}",
                          "{{ x is }}",
                          "{{ 'a' ! 'b' }}",
                          "{{ 0x }}",
                          "{% macro m(a=1, b) %}{% endmacro %}",
                          "{% set 1 = 2 %}",
                          "{% break %}",
                          "{% extends 'base' %}",
                          "{% include 'x' %}",
                          "{{ '\\xZZ' }}",
                          "{{ 99999999999999999999 }}"}) {
    const std::string out = render(src);
    EXPECT_TRUE(is_error(out)) << src << " -> " << out;
    EXPECT_NE(out.find("syntax error (line 1)"), std::string::npos) << src << " -> " << out;
  }
}

TEST(ChatTemplateHostile, DeepNestingIsRejected) {
  constexpr size_t kDeep = 20000;
  EXPECT_TRUE(is_error(render("{{ " + repeat("(", kDeep) + "1" + repeat(")", kDeep) + " }}")));
  EXPECT_TRUE(is_error(render("{{ " + repeat("[", kDeep) + repeat("]", kDeep) + " }}")));
  EXPECT_TRUE(is_error(render("{{ " + repeat("not ", kDeep) + "x }}")));
  EXPECT_TRUE(is_error(render("{{ " + repeat("-", kDeep) + "1 }}")));
  EXPECT_TRUE(is_error(render("{{ 1" + repeat(" + 1", kDeep) + " }}")));
  EXPECT_TRUE(is_error(render("{{ x" + repeat(".a", kDeep) + " }}")));
  EXPECT_TRUE(is_error(render("{{ x" + repeat("|trim", kDeep) + " }}")));
  EXPECT_TRUE(is_error(render("{{ 1" + repeat(" if 1 else 1", kDeep) + " }}")));
  EXPECT_TRUE(is_error(render(repeat("{% if true %}", kDeep) + repeat("{% endif %}", kDeep))));
  EXPECT_TRUE(is_error(render(repeat("{% for x in [1] %}", 5000) + repeat("{% endfor %}", 5000))));
  // Moderate nesting still works.
  EXPECT_EQ(render("{{ " + repeat("(", 30) + "1" + repeat(")", 30) + " }}"), "1");
  EXPECT_EQ(render(repeat("{% if true %}", 50) + "x" + repeat("{% endif %}", 50)), "x");
  EXPECT_EQ(render("{{ 1" + repeat(" + 1", 100) + " }}"), "101");
}

TEST(ChatTemplateHostile, RunawayLoopsHitTheStepLimit) {
  const auto o = small_budget();
  const std::string loops =
      "{% set r = range(1000) %}{% for a in r %}{% for b in r %}{% for c in r %}{% endfor %}"
      "{% endfor %}{% endfor %}";
  const std::string out = render(loops, nlohmann::ordered_json::object(), o);
  EXPECT_TRUE(is_error(out));
  EXPECT_NE(out.find("step limit"), std::string::npos) << out;
  EXPECT_TRUE(is_error(render("{% for i in range(1000000) %}{% endfor %}")));  // sandbox range
  // Exponential macro recursion.
  EXPECT_TRUE(
      is_error(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}"
                      "{% endif %}{% endmacro %}{{ f(60) }}",
                      nlohmann::ordered_json::object(), o)));
}

TEST(ChatTemplateHostile, UnboundedRecursionHitsTheDepthLimit) {
  const std::string out = render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_TRUE(is_error(out));
  EXPECT_NE(out.find("recursion"), std::string::npos) << out;
  EXPECT_TRUE(is_error(render("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}")));
  // A string that is iterable recurses forever in some real templates' schema macros.
  EXPECT_TRUE(
      is_error(render("{% macro t(s) %}{% for x in s %}{{ t(x) }}{% endfor %}"
                      "{% endmacro %}{{ t('null') }}")));
}

TEST(ChatTemplateHostile, OutputAndMemoryBombsAreBounded) {
  const auto o = small_budget();
  const auto ctx = nlohmann::ordered_json::object();
  EXPECT_TRUE(
      is_error(render("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      ctx, o)));
  EXPECT_TRUE(is_error(render("{{ 'x' * 1000000000000 }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ ([0] * 1000000000)|length }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ 'x'|center(1000000000) }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ 'x'.ljust(1000000000) }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ 'a\\nb'|indent(1000000000) }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ 'ab'|replace('', 'x' * 100000) * 100 }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ '%999999999d' % 1 }}", ctx, o)));
  EXPECT_TRUE(is_error(render("{{ '{:>999999999}'.format(1) }}", ctx, o)));
  EXPECT_TRUE(
      is_error(render("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxx' }}"
                      "{% endfor %}",
                      ctx, o)));
  EXPECT_TRUE(is_error(render("{{ 2 ** 100 }}")));  // no big integers: an error, not garbage
  EXPECT_TRUE(is_error(render("{{ strftime_now('%c' * 1000) }}")));
}

TEST(ChatTemplateHostile, CyclicAndDeepValuesAreErrors) {
  EXPECT_TRUE(is_error(render("{% set l = [] %}{% do l.append(l) %}{{ l }}")));
  EXPECT_TRUE(is_error(render("{% set l = [] %}{% do l.append(l) %}{{ l|tojson }}")));
  EXPECT_TRUE(is_error(render("{% set l = [] %}{% do l.append(l) %}{{ l == l }}")));
  EXPECT_TRUE(is_error(render("{% set d = {} %}{% do d.update({'d': d}) %}{{ d|string }}")));
  // Appending to itself without printing is fine; teardown is flat.
  EXPECT_EQ(render("{% set l = [] %}{% do l.append(l) %}{{ l|length }}"), "1");
  EXPECT_TRUE(
      is_error(render("{% set ns = namespace(x=[]) %}{% for i in range(20000) %}"
                      "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}")));
  // Deeply nested context JSON.
  const auto deep = nlohmann::ordered_json::parse(repeat("[", 2000) + repeat("]", 2000));
  EXPECT_TRUE(is_error(render("{{ x }}", {{"x", deep}})));
}

TEST(ChatTemplateHostile, OddBytesPassThrough) {
  const std::string nul("a\0b", 3);
  EXPECT_EQ(render(nul + "{{ x }}", {{"x", std::string("c\0d", 3)}}), std::string("a\0bc\0d", 6));
  EXPECT_EQ(render("\xff\xfe{{ '\xc3' }}\x80"), "\xff\xfe\xc3\x80");
  EXPECT_EQ(render("{{ '\xff'|length }} {{ '\xff'|upper }}"), "1 \xff");
}

// Random token soup must never crash (run under ASan in CI) and must stay within budget.
TEST(ChatTemplateHostile, RandomTemplatesNeverCrash) {
  static const char* const kPieces[] = {
      "{{",        "}}",    "{%",       "%}",     "{#",      "#}",       "-",         "+",
      " ",         "\n",    "if",       "else",   "elif",    "endif",    "for",       "in",
      "endfor",    "set",   "=",        "x",      "y",       "loop",     ".",         "index",
      "[",         "]",     "(",        ")",      "{",       "}",        "'s'",       "\"t\"",
      "1",         "2.5",   "|",        "length", "upper",   "join",     "is",        "defined",
      "not",       "and",   "or",       "~",      "*",       "/",        "//",        "%",
      "**",        "macro", "endmacro", "call",   "endcall", "caller",   ",",         ":",
      "namespace", "ns",    "range",    "raw",    "endraw",  "messages", "tojson",    "items",
      "recursive", "break", "continue", "true",   "none",    "filter",   "endfilter", "with",
      "endwith",   "\\",    "'",        "\""};
  std::mt19937 rng(12345);
  std::uniform_int_distribution<size_t> pick(0, std::size(kPieces) - 1);
  std::uniform_int_distribution<int> len(1, 40);
  ChatTemplateOptions o = small_budget();
  o.max_steps = 20'000;
  nlohmann::ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"x", {1, 2, 3}}};
  int rendered = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string src;
    for (int n = len(rng); n > 0; --n) src += kPieces[pick(rng)];
    auto t = ChatTemplate::parse(src);
    if (!t.ok()) continue;
    auto out = t->render(ctx, o);
    rendered += out.ok();
  }
  EXPECT_GT(rendered, 100);
}

}  // namespace
}  // namespace vela
