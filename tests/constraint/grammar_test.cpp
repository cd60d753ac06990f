// GBNF parsing, regex and choice compilation, and the byte matcher.
#include <chrono>

#include "constraint/regex_to_gbnf.h"
#include "constraint/utf8_ranges.h"
#include "constraint_test_util.h"

namespace vela::constraint::test {
namespace {

StructuredOutputs gbnf(const std::string& text) {
  StructuredOutputs s;
  s.grammar = text;
  return s;
}
StructuredOutputs regex(const std::string& text) {
  StructuredOutputs s;
  s.regex = text;
  return s;
}

void expect_language(const StructuredOutputs& spec, const std::vector<std::string>& accept,
                     const std::vector<std::string>& reject) {
  auto g = compile_spec(spec);
  ASSERT_TRUE(g) << g.message();
  for (const auto& s : accept) EXPECT_TRUE(full_match(**g, s)) << "should accept: " << s;
  for (const auto& s : reject) EXPECT_FALSE(full_match(**g, s)) << "should reject: " << s;
}

TEST(Gbnf, LiteralsClassesRepetition) {
  expect_language(gbnf("root ::= \"a\" [0-9]+ (\"x\" | \"yz\")? [^a-c]{2,3}\n"),
                  {"a1dd", "a123xdef", "a9yzé日"}, {"a", "adx", "a1xa", "a1dddd", "a1d"});
}

TEST(Gbnf, MultilineAlternativesCommentsAndRecursion) {
  expect_language(gbnf("# nested lists\n"
                       "root ::= list\n"
                       "list ::= \"(\" (item (\" \" item)*)? \")\"   # a list\n"
                       "item ::= [a-z]+\n"
                       "       | list\n"),
                  {"()", "(a b)", "((a) (b (c)))"}, {"(", "(a b", "(A)", "(a  b)"});
}

TEST(Gbnf, EscapesAndUnicodeClasses) {
  expect_language(gbnf("root ::= \"\\x41\\u00e9\\n\" [\\u4e00-\\u9fff]\n"), {"Aé\n日"},
                  {"Aé\n", "Ae\n日", "Aé\na"});
  expect_language(gbnf("root ::= .+\n"), {"x", "日本語", "\xF0\x9F\x98\x80"},
                  {"", "\xFF", "\xED\xA0\x80" /* a surrogate */});
}

TEST(Gbnf, ErrorsNameTheProblem) {
  const auto err = [](const std::string& text) {
    auto g = compile_spec(gbnf(text));
    return g ? std::string() : g.message();
  };
  EXPECT_NE(err("root ::= foo\n").find("'foo' is used but not defined"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\" root\n").find("no finite string"), std::string::npos);
  EXPECT_NE(err("root ::= root \"a\" | \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\nx ::= y\n").find("line 1"), std::string::npos);
  EXPECT_NE(err("x ::= \"a\"\n").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(err("root ::= [a-z\n").find("unterminated"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{3,1}\n").find("n < m"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{1000000}\n").find("repetition count"), std::string::npos);
  // Hostile nesting is an error, not a stack overflow; the limit itself still parses.
  const auto nested = [](size_t depth) {
    return "root ::= " + std::string(depth, '(') + "\"a\"" + std::string(depth, ')') + "\n";
  };
  EXPECT_NE(err(nested(1'000'000)).find("nested deeper than 1000"), std::string::npos);
  EXPECT_EQ(err(nested(kMaxGroupNesting)), "");
}

TEST(Regex, CommonSyntax) {
  expect_language(regex("^(\\d{3})-[A-Z]{2,}$"), {"123-AB", "000-XYZW"},
                  {"12-AB", "123-A", "123-ab", "1234-AB"});
  expect_language(regex("(?:cat|dog)s?\\.|\\w+@\\w+\\.com"), {"cat.", "dogs.", "a_b@x1.com"},
                  {"cats", "bird.", "@x.com"});
  expect_language(regex("[^\\s,]+(,[^\\s,]+)*"), {"a,b,c", "x"}, {"a,,b", "a b", ""});
  expect_language(regex(".*"), {"", "anything at all é"}, {"two\nlines"});
}

TEST(Regex, UnsupportedConstructsAreErrors) {
  for (const char* bad : {"(a)\\1", "a(?=b)", "a\\b", "a**", "[z-a]", "(ab", "ab)", "x{2"}) {
    auto g = compile_spec(regex(bad));
    ASSERT_FALSE(g) << bad;
    EXPECT_NE(g.message().find("invalid regex"), std::string::npos) << g.message();
  }
}

TEST(Regex, CatastrophicPatternsStayLinear) {
  // Backtracking engines take exponential time on these; the stack-set matcher does not.
  for (const char* pattern : {"(a+)+b", "(a|a)*b", "(a*)*b", "((a|aa)+)+b"}) {
    auto g = compile_spec(regex(pattern));
    ASSERT_TRUE(g) << g.message();
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(full_match(**g, std::string(5000, 'a') + "c"));
    EXPECT_TRUE(full_match(**g, std::string(200, 'a') + "b"));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              20.0);
  }
}

TEST(Choice, ExactStrings) {
  StructuredOutputs s;
  s.choice = {"yes", "no", "maybe \"so\""};
  expect_language(s, {"yes", "no", "maybe \"so\""}, {"ye", "yesno", "No", ""});
}

TEST(Spec, ExactlyOneConstraint) {
  StructuredOutputs s;
  s.regex = "a";
  s.choice = {"b"};
  auto g = compile_spec(s);
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find("at most one"), std::string::npos);
}

TEST(Utf8Ranges, SplitCoversExactlyTheRange) {
  // Every code point of a mixed range encodes to a sequence the split accepts, and nothing else.
  const std::vector<CodepointRange> ranges = {{0x70, 0x900}, {0xFFF0, 0x10010}};
  const auto seqs = utf8_sequences(ranges);
  const auto accepted = [&](const std::vector<uint8_t>& bytes) {
    for (const auto& seq : seqs) {
      if (seq.size() != bytes.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < seq.size(); ++i)
        ok = ok && bytes[i] >= seq[i].lo && bytes[i] <= seq[i].hi;
      if (ok) return true;
    }
    return false;
  };
  for (uint32_t cp = 0; cp < 0x10100; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::vector<uint8_t> bytes;
    append_utf8(cp, bytes);
    const bool inside = (cp >= 0x70 && cp <= 0x900) || (cp >= 0xFFF0 && cp <= 0x10010);
    ASSERT_EQ(accepted(bytes), inside) << std::hex << cp;
  }
}

}  // namespace
}  // namespace vela::constraint::test
