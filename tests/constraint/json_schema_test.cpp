// JSON Schema -> grammar on a corpus: each schema with documents it must accept and reject.
#include <nlohmann/json.hpp>

#include "constraint/json_schema_to_gbnf.h"
#include "constraint_test_util.h"

namespace vela::constraint::test {
namespace {

struct Case {
  const char* name;
  const char* schema;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

const std::vector<Case>& corpus() {
  static const std::vector<Case> cases = {
      {"primitives",
       R"({"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},
        "n":{"type":"number"},"b":{"type":"boolean"},"z":{"type":"null"}},
        "required":["s","i","n","b","z"],"additionalProperties":false})",
       {R"({"s":"x","i":-12,"n":3.5e-2,"b":true,"z":null})",
        R"({"s": "", "i": 0, "n": -0.0, "b": false, "z": null})"},
       {R"({"s":1,"i":-12,"n":3.5,"b":true,"z":null})",
        R"({"s":"x","i":1.5,"n":3,"b":true,"z":null})",
        R"({"i":1,"s":"x","n":3,"b":true,"z":null})", R"({"s":"x","i":01,"n":3,"b":true,"z":null})",
        R"({"s":"x","i":1,"n":3,"b":true,"z":null,"extra":1})"}},
      {"optional members keep their order",
       R"({"type":"object","properties":{"a":{"type":"integer"},
        "b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]})",
       {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
       {R"({})", R"({"a":1})", R"({"b":1,"a":2})", R"({"a":1,,"b":2})", R"({"b":1,})"}},
      {"escapes and unicode",
       R"({"type":"string"})",
       {R"("plain")", R"("quote \" backslash \\ slash \/ \b\f\n\r\t")", R"("\u00e9\u65e5")",
        "\"日本語 é 😀\""},
       {R"("bad \x escape")", "\"raw\nnewline\"", R"("\u12")", R"("unterminated)", "\"\xFF\""}},
      {"enum and const",
       R"({"type":"object","properties":{"color":{"enum":["red","green",null,3]},
        "v":{"const":{"k":[1,"x"]}}},"required":["color","v"]})",
       {R"({"color":"red","v":{"k":[1,"x"]}})", R"({"color":null,"v":{"k":[1,"x"]}})",
        R"({"color":3,"v":{"k":[1,"x"]}})"},
       {R"({"color":"blue","v":{"k":[1,"x"]}})", R"({"color":"red","v":{"k":[1]}})"}},
      {"arrays with bounds",
       R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
       {"[1,2]", "[1, 2, 3]"},
       {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"}},
      {"array without bounds",
       R"({"type":"array","items":{"type":"boolean"}})",
       {"[]", "[true]", "[true,false,true]"},
       {"[,]", "[true,]", "[null]"}},
      {"prefixItems",
       R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {"[]", R"(["a"])", R"(["a",1])"},
       {R"([1])", R"(["a",1,2])"}},
      {"nested objects",
       R"({"type":"object","properties":{"user":{"type":"object","properties":{
        "name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},
        "required":["name","tags"]}},"required":["user"]})",
       {R"({"user":{"name":"a","tags":[]}})", R"({"user":{"name":"a","tags":["x","y"]}})"},
       {R"({"user":{"name":"a"}})", R"({"user":{"name":"a","tags":["x","y","z"]}})"}},
      {"recursive $ref",
       R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
        "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
        "$ref":"#/$defs/node"})",
       {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"},
       {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"}},
      {"root recursion",
       R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
        "required":["next"]})",
       {R"({"next":null})", R"({"next":{"next":{"next":null}}})"},
       {R"({"next":{}})"}},
      {"anyOf and type lists",
       R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})",
       {"5", R"("ab")"},
       {R"("abc")", "true"}},
      {"oneOf disjoint",
       R"({"oneOf":[{"type":"boolean"},{"type":["null","integer"]}]})",
       {"true", "null", "-3"},
       {"1.5", R"("x")"}},
      {"string lengths",
       R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("a\nc")", R"("日本語")"},
       {R"("a")", R"("abcd")"}},
      {"pattern",
       R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})",
       {R"("AB-123")"},
       {R"("ab-123")", R"("AB-12")", R"(AB-123)"}},
      {"pattern with quotes",
       R"({"type":"string","pattern":"say \"(hi|yo)\""})",
       {R"("say \"hi\"")"},
       {R"("say "hi"")", R"("say \"no\"")"}},
      {"formats",
       R"({"type":"object","properties":{"d":{"type":"string","format":"date"},
        "u":{"type":"string","format":"uuid"},"t":{"type":"string","format":"date-time"}},
        "required":["d","u","t"]})",
       {R"({"d":"2024-02-29","u":"123e4567-e89b-12d3-a456-426614174000","t":"2024-01-01T10:20:30Z"})"},
       {R"({"d":"2024-13-01","u":"x","t":"2024-01-01"})"}},
      {"integer range",
       R"({"type":"integer","minimum":-15,"maximum":120})",
       {"-15", "-1", "0", "9", "10", "99", "100", "120"},
       {"-16", "121", "200", "1000", "-0x"}},
      {"exclusive range",
       R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":1000})",
       {"10", "999"},
       {"9", "1000", "5"}},
      {"number range",
       R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "1", "0.25"},
       {"1.5", "-0.5", "2"}},
      {"number range across zero",
       R"({"type":"number","minimum":-2,"maximum":3})",
       {"-2", "-1.75", "-0.5", "0.5", "2.999", "3"},
       {"-2.5", "-3", "3.5", "4"}},
      {"negative number range",
       R"({"type":"number","minimum":-10,"maximum":-2})",
       {"-10", "-9.5", "-2.25", "-2"},
       {"-1.5", "-10.5", "0", "-0.5", "-11"}},
      {"empty schema is any value",
       R"({})",
       {R"({"a":[1,{"b":null}]})", "3", R"("s")"},
       {"{", "tru"}},
      {"additionalProperties schema",
       R"({"type":"object","properties":{"id":{"type":"integer"}},
        "required":["id"],"additionalProperties":{"type":"string"}})",
       {R"({"id":1})", R"({"id":1,"x":"y","z":"w"})"},
       {R"({"id":1,"x":2})"}},
      {"oneOf with a discriminator",
       R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
        "required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"},
        "y":{"type":"string"}},"required":["kind","y"]}]})",
       {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})"},
       {R"({"kind":"a","y":"s"})", R"({"kind":"c","x":1})", R"({"kind":"b","x":1})"}},
      {"oneOf with enums of distinct values",
       R"({"oneOf":[{"enum":["x","y"]},{"enum":[1,2]},{"const":null}]})",
       {R"("x")", "2", "null"},
       {R"("z")", "3", "true"}},
      {"oneOf overlapping branches behaves as anyOf",
       R"({"oneOf":[{"type":"integer","maximum":10},{"type":"integer","minimum":5}]})",
       {"3", "7", "12"},
       {"1.5", R"("7")"}},
      {"required member in the middle, optional ones around it",
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
        "c":{"type":"integer"},"d":{"type":"integer"}},"required":["c"]})",
       {R"({"c":3})", R"({"a":1,"c":3})", R"({"b":2,"c":3})", R"({"c":3,"d":4})",
        R"({"a":1,"b":2,"c":3})", R"({"a":1,"c":3,"d":4})", R"({"b":2,"c":3,"d":4})",
        R"({"a":1,"b":2,"c":3,"d":4})"},
       {R"({})", R"({"a":1,"b":2,"d":4})", R"({"c":3,"a":1})", R"({"d":4,"c":3})",
        R"({"c":3,,"d":4})", R"({,"c":3})"}},
      {"required member last",
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
        "z":{"type":"string"}},"required":["z"],"additionalProperties":false})",
       {R"({"z":"s"})", R"({"a":1,"z":"s"})", R"({"b":2,"z":"s"})", R"({"a":1,"b":2,"z":"s"})"},
       {R"({"a":1})", R"({"a":1,"b":2})", R"({"z":"s","a":1})"}},
      {"every member optional",
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
        "c":{"type":"integer"}}})",
       {R"({})", R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"a":1,"b":2})", R"({"a":1,"c":3})",
        R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})", R"({ })"},
       {R"({"b":2,"a":1})", R"({"a":1,})", R"({,})", R"({"a":1,"a":1})"}},
      {"additional members never reuse a named key",
       R"({"type":"object","properties":{"ab":{"type":"integer"},"é":{"type":"integer"}},
        "additionalProperties":true})",
       {R"({})", R"({"ab":1})", R"({"x":"y"})", R"({"ab":1,"a":[],"abc":null,"":2})",
        R"({"é":1,"e":"s","éé":true})"},
       {R"({"ab":"s"})", R"({"ab":1,"ab":2})", R"({"x":1,"ab":2})", R"({"é":"s"})",
        R"({"ab":1,"é":2,"é":3})"}},
      {"required key without a property schema takes additionalProperties",
       R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["z"],
        "additionalProperties":{"type":"string"}})",
       {R"({"z":"s"})", R"({"a":1,"z":"s"})", R"({"a":1,"z":"s","w":"t"})"},
       {R"({"a":1})", R"({"z":1})", R"({"z":"s","z":"t"})", R"({"w":"t"})"}},
  };
  return cases;
}

TEST(JsonSchema, Corpus) {
  for (const Case& c : corpus()) {
    SCOPED_TRACE(c.name);
    auto g = compile_spec(json_spec(c.schema));
    ASSERT_TRUE(g) << g.message();
    for (const auto& s : c.accept) EXPECT_TRUE(full_match(**g, s)) << "should accept: " << s;
    for (const auto& s : c.reject) EXPECT_FALSE(full_match(**g, s)) << "should reject: " << s;
  }
}

// An enum far larger than the matcher's stack cap: every value stays reachable (the values form
// a prefix tree, so reading a value keeps one stack per byte), including values that are
// prefixes of others and mixed JSON types; nothing else is accepted.
TEST(JsonSchema, LargeEnumAcceptsEveryValue) {
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 1500; ++i) values.push_back("v" + std::to_string(i));
  values.push_back(7);
  values.push_back(nullptr);
  values.push_back(nlohmann::json{{"k", 1}});
  auto g = compile_spec(json_spec(nlohmann::json{{"enum", values}}.dump()));
  ASSERT_TRUE(g) << g.message();
  for (const auto& v : values) EXPECT_TRUE(full_match(**g, v.dump())) << v.dump();
  for (const char* s : {R"("v1500")", R"("v")", R"("v01")", "70", R"({"k":2})", "nul"})
    EXPECT_FALSE(full_match(**g, s)) << s;
}

// Values whose JSON text is long (far over a few hundred bytes), many of them sharing long
// prefixes, and chains where each value is a prefix of the next: all reachable, nothing else.
TEST(JsonSchema, LongEnumAndConstValues) {
  nlohmann::json values = nlohmann::json::array();
  const std::string shared(290, 'p');
  for (int i = 0; i < 1000; ++i)
    values.push_back(shared + std::to_string(i) + std::string(20, 'q'));
  for (int n = 1; n <= 600; ++n) values.push_back(std::string(size_t(n), 'a'));
  values.push_back(nlohmann::json{{"k", std::string(5000, 'z')}, {"n", 1}});
  auto g = compile_spec(json_spec(nlohmann::json{{"enum", values}}.dump()));
  ASSERT_TRUE(g) << g.message();
  for (const auto& v : values) EXPECT_TRUE(full_match(**g, v.dump())) << v.dump().substr(0, 40);
  for (const std::string& s :
       {nlohmann::json(shared + "1000" + std::string(20, 'q')).dump(),
        nlohmann::json(shared + "7" + std::string(19, 'q')).dump(),
        nlohmann::json(std::string(601, 'a')).dump(), nlohmann::json(shared).dump(),
        nlohmann::json{{"k", std::string(4999, 'z')}, {"n", 1}}.dump()})
    EXPECT_FALSE(full_match(**g, s)) << s.substr(0, 40);

  const nlohmann::json long_const = {{"text", std::string(3000, 'x')}, {"list", {1, 2, 3}}};
  auto c = compile_spec(json_spec(nlohmann::json{{"const", long_const}}.dump()));
  ASSERT_TRUE(c) << c.message();
  EXPECT_TRUE(full_match(**c, long_const.dump()));
  EXPECT_FALSE(full_match(**c, nlohmann::json{{"text", std::string(3000, 'x')}}.dump()));
}

TEST(JsonSchema, EnumAndConstSizeIsBounded) {
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 300; ++i) values.push_back(std::to_string(i) + std::string(4000, 'v'));
  auto g = compile_spec(json_spec(nlohmann::json{{"enum", values}}.dump()));
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find("enum values total over"), std::string::npos) << g.message();
  auto c = compile_spec(json_spec(nlohmann::json{{"const", std::string(2 << 20, 'c')}}.dump()));
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("const is over"), std::string::npos) << c.message();
}

TEST(JsonSchema, LooseWhitespaceIsBounded) {
  StructuredOutputs s =
      json_spec(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  s.compact_whitespace = false;
  auto g = compile_spec(s);
  ASSERT_TRUE(g) << g.message();
  EXPECT_TRUE(full_match(**g, "{\n  \"a\": 1\n}"));
  EXPECT_FALSE(full_match(**g, "{" + std::string(kLooseWhitespace + 1, ' ') + "\"a\":1}"));
  auto strict = compile_spec(
      json_spec(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"));
  ASSERT_TRUE(strict);
  EXPECT_TRUE(full_match(**strict, "{\"a\": 1}"));
  EXPECT_FALSE(full_match(**strict, "{\"a\":\n1}"));
  EXPECT_FALSE(full_match(**strict, "{\"a\":  1}"));
}

TEST(JsonSchema, JsonObject) {
  StructuredOutputs s;
  s.json_object = true;
  auto g = compile_spec(s);
  ASSERT_TRUE(g) << g.message();
  EXPECT_TRUE(full_match(**g, R"({"k":[1,2,{"x":"y"}],"n":null})"));
  EXPECT_TRUE(full_match(**g, "{}"));
  EXPECT_FALSE(full_match(**g, "[1]"));
  EXPECT_FALSE(full_match(**g, R"("s")"));
}

TEST(JsonSchema, InvalidSchemasNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"type":"strnig"})", "unknown type 'strnig'"},
      {R"({"type":"object","properties":{"a":{"not":{}}}})", "#/properties/a: the keyword 'not'"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"type":"array","minItems":3,"maxItems":1})", "maxItems is below minItems"},
      {R"({"type":"string","pattern":"(a"})", "invalid regex"},
      {R"({"type":"integer","minimum":5,"maximum":1})", "no integer"},
      {R"({"type":"object","required":["x"],"properties":{}})",
       "required property 'x' is not in properties and no additional properties are allowed"},
      {"{not json", "not valid JSON"},
      {"false", "accepts nothing"},
      {R"({"type":"string","nullable":"yes"})", "nullable must be a boolean"},
      {R"({"type":"object","properties":{"a":{"$ref":"#/properties/a"}},"required":["a"]})",
       "no finite string"},
  };
  for (const auto& [schema, expected] : bad) {
    auto g = compile_spec(json_spec(schema));
    ASSERT_FALSE(g) << schema;
    EXPECT_NE(g.message().find(expected), std::string::npos) << schema << " -> " << g.message();
  }
}

}  // namespace
}  // namespace vela::constraint::test
