// JSON Schema strings with a pattern (or a format) and minLength / maxLength at once: the
// pattern's automaton times a length counter, lengths counted in characters of the decoded
// string; and the bounds on the product's size.
#include <chrono>

#include <nlohmann/json.hpp>

#include "constraint/regex_length.h"
#include "constraint_test_util.h"

namespace vela::constraint::test {
namespace {

void expect_schema_language(const std::string& schema, const std::vector<std::string>& accept,
                            const std::vector<std::string>& reject) {
  SCOPED_TRACE(schema);
  auto g = compile_spec(json_spec(schema));
  ASSERT_TRUE(g) << g.message();
  for (const auto& s : accept) EXPECT_TRUE(full_match(**g, s)) << "should accept: " << s;
  for (const auto& s : reject) EXPECT_FALSE(full_match(**g, s)) << "should reject: " << s;
}

void expect_schema_error(const std::string& schema, const std::string& expected) {
  auto g = compile_spec(json_spec(schema));
  ASSERT_FALSE(g) << schema;
  EXPECT_NE(g.message().find(expected), std::string::npos) << schema << " -> " << g.message();
}

TEST(PatternWithLength, BothConstraintsHold) {
  expect_schema_language(R"({"type":"string","pattern":"^[a-z]+$","minLength":2,"maxLength":4})",
                         {R"("ab")", R"("abc")", R"("abcd")"},
                         {R"("a")", R"("abcde")", R"("AB")", R"("ab1")", R"("")"});
  // Only a minimum: the counter saturates at it.
  expect_schema_language(R"({"type":"string","pattern":"^(ab)+$","minLength":3})",
                         {R"("abab")", R"("ababab")", R"("abababababababababab")"},
                         {R"("ab")", R"("aba")", R"("ababa")"});
  // Only a maximum, with a pattern that allows the empty string.
  expect_schema_language(R"({"type":"string","pattern":"^x*y?$","maxLength":3})",
                         {R"("")", R"("y")", R"("xxy")", R"("xxx")"},
                         {R"("xxxy")", R"("xxxx")", R"("yx")"});
}

TEST(PatternWithLength, EscapesAndMultibyteCharactersCountOnce) {
  // "\n" and "\"" are two bytes of JSON text but one character each.
  expect_schema_language(R"({"type":"string","pattern":"^(a|\\n|\")*$","minLength":2,
                             "maxLength":2})",
                         {R"("a\n")", R"("\"\n")", R"("aa")", R"("\n\n")"},
                         {R"("\n")", R"("a\n\n")", R"("aaa")", R"("a")"});
  expect_schema_language(R"({"type":"string","pattern":"^.+$","minLength":2,"maxLength":2})",
                         {R"("日本")", R"("ab")", R"("é😀")"},
                         {R"("日本語")", R"("日")", R"("abc")"});
}

TEST(PatternWithLength, OverlappingAlternativesAndNestedRepetition) {
  expect_schema_language(
      R"({"type":"string","pattern":"^(a|ab|abc)(c|cd)?$","minLength":3,"maxLength":3})",
      {R"("abc")", R"("acd")"}, {R"("ac")", R"("abcc")", R"("abcd")", R"("a")"});
  expect_schema_language(
      R"({"type":"string","pattern":"^([0-9]{2}-){1,3}[0-9]$","minLength":7,"maxLength":8})",
      {R"("12-34-5")"}, {R"("12-5")", R"("12-34-56-7")", R"("12-34-")"});
}

TEST(PatternWithLength, FormatsTakeLengthBoundsToo) {
  expect_schema_language(R"({"type":"string","format":"email","maxLength":8})",
                         {R"("a@b.cd")", R"("ab@cd.ef")"}, {R"("abc@de.fgh")", R"("a@b")"});
  expect_schema_language(R"({"type":"string","format":"date","minLength":10,"maxLength":10})",
                         {R"("2024-02-29")"}, {R"("2024-2-29")", R"("2024-13-01")"});
  // An unknown format only annotates; the length still applies.
  expect_schema_language(R"({"type":"string","format":"hostname","maxLength":2})",
                         {R"("ab")", R"("")"}, {R"("abc")"});
}

TEST(PatternWithLength, ErrorsNameTheProblem) {
  expect_schema_error(R"({"type":"string","pattern":"^[a-z]{5}$","maxLength":3})",
                      "no string matches the pattern with a length");
  expect_schema_error(R"({"type":"string","pattern":"^[a-z]{0,1000}[0-9]{0,1000}$",
                          "maxLength":5000})",
                      "needs more than 100000 grammar states");
  expect_schema_error(R"({"type":"string","pattern":"(a","maxLength":3})", "invalid regex");
}

TEST(PatternWithLength, ProductStaysWithinItsBounds) {
  // A long unbounded class against a large maximum: one position, a state per length.
  auto g = regex_with_length_to_gbnf(".*", true, {0, 10000, true}, "t");
  ASSERT_TRUE(g) << g.message();
  EXPECT_LE(g->rules.size(), 10003u);
  // A repetition that unrolls past the position limit is refused, not built.
  auto big = regex_with_length_to_gbnf("((a{1000}){1000}){1000}", true, {0, 5, true}, "t");
  ASSERT_FALSE(big);
  EXPECT_NE(big.message().find("grammar states"), std::string::npos) << big.message();
  // A nullable repetition of a nullable operand links each copy to every later one; the link
  // count is bounded too.
  auto links = regex_with_length_to_gbnf("(a?){2000}b", true, {0, 10, true}, "t");
  ASSERT_FALSE(links);
  EXPECT_NE(links.message().find("transitions"), std::string::npos) << links.message();
}

// Near the state limit (about 90,000 states) the schema compiles and matches in bounded time.
TEST(PatternWithLength, LargeProductCompilesAndMatches) {
  const auto start = std::chrono::steady_clock::now();
  auto g = compile_spec(
      json_spec(R"({"type":"string","pattern":"^[a-z]{0,300}[0-9]{0,300}$","maxLength":600})"));
  ASSERT_TRUE(g) << g.message();
  EXPECT_TRUE(full_match(**g, "\"" + std::string(300, 'k') + std::string(300, '7') + "\""));
  EXPECT_TRUE(full_match(**g, "\"" + std::string(10, 'k') + std::string(290, '7') + "\""));
  EXPECT_FALSE(full_match(**g, "\"" + std::string(301, 'k') + "\""));
  EXPECT_FALSE(full_match(**g, "\"" + std::string(3, '7') + "k\""));
  SequenceConstraint seq(*g);
  EXPECT_FALSE(seq.mask().empty());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0);
}

}  // namespace
}  // namespace vela::constraint::test
