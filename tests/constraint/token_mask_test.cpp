// Token masks: exactly the tokens whose bytes keep the text a viable prefix (checked against a
// brute-force walk of every token), along random walks over small and real vocabularies; and
// hostile inputs compile in bounded time or fail with an error.
#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "constraint_test_util.h"
#include "io/gguf.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace vela::constraint::test {
namespace {

const std::vector<std::string> kSchemas = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer"},
       "tags":{"type":"array","items":{"enum":["a","b\"c","日本"]},"maxItems":3}},"required":["name","age"]})",
    R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"boolean"},"k":{"type":"array",
       "items":{"$ref":"#/$defs/n"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/n"})",
    R"({"anyOf":[{"type":"number","minimum":0,"maximum":50},{"type":"string","pattern":"[a-c]+\\.x"}]})",
    R"({"type":"string"})",
    R"({"type":"string","pattern":"^(a|b\\.|\"|日)+x?$","minLength":2,"maxLength":5})",
};

bool has(std::span<const uint64_t> m, int32_t id) {
  return (m[size_t(id) >> 6] >> (id & 63)) & 1;
}

// Walks `steps` random allowed tokens; at each step the mask must equal the brute-force set
// (for every token when `every_token`, else for a random sample of 2000).
void random_walks(const std::shared_ptr<const TokenVocabulary>& vocab, int walks, int steps,
                  bool every_token) {
  std::mt19937 rng(7);
  for (const std::string& schema : kSchemas) {
    SCOPED_TRACE(schema);
    auto g = compile_spec(json_spec(schema), vocab);
    ASSERT_TRUE(g) << g.message();
    const CompiledGrammar& cg = **g;
    const auto& eog = vocab->end_of_generation();
    for (int w = 0; w < walks; ++w) {
      SequenceConstraint seq(*g);
      StackSet state = cg.initial();
      std::string text;
      bool ended = false;
      for (int step = 0; step < steps && !ended; ++step) {
        const auto mask = seq.mask();
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->n_vocab(); ++id)
          if (has(mask, id)) allowed.push_back(id);
        ASSERT_FALSE(allowed.empty()) << "dead state after " << text;
        const auto brute = [&](int32_t id) {
          if (std::find(eog.begin(), eog.end(), id) != eog.end()) return is_accepting(state);
          if (vocab->piece(id).empty()) return false;
          StackSet s = state;
          return advance_bytes(cg.grammar(), s, vocab->piece(id));
        };
        if (every_token) {
          for (int32_t id = 0; id < vocab->n_vocab(); ++id)
            ASSERT_EQ(has(mask, id), brute(id))
                << "token " << id << " '" << vocab->piece(id) << "' after '" << text << "'";
        } else {
          for (int k = 0; k < 2000; ++k) {
            const int32_t id = int32_t(rng() % uint32_t(vocab->n_vocab()));
            ASSERT_EQ(has(mask, id), brute(id)) << "token " << id << " after '" << text << "'";
          }
          for (int32_t id : allowed) ASSERT_TRUE(brute(id)) << "token " << id << " after " << text;
        }
        // Prefer ending once possible half the time, so walks also finish.
        int32_t pick = allowed[rng() % allowed.size()];
        for (int32_t id : eog)
          if (has(mask, id) && rng() % 2 == 0) pick = id;
        ASSERT_TRUE(seq.accept(pick));
        if (std::find(eog.begin(), eog.end(), pick) != eog.end()) {
          ended = true;
        } else {
          ASSERT_TRUE(advance_bytes(cg.grammar(), state, vocab->piece(pick)));
          text += vocab->piece(pick);
        }
      }
      if (ended) {
        EXPECT_TRUE(full_match(cg, text)) << text;
        EXPECT_TRUE(nlohmann::json::accept(text)) << text;
      }
    }
  }
}

TEST(TokenMask, MatchesBruteForceOnSmallVocabulary) {
  random_walks(small_vocab(), 20, 80, /*every_token=*/true);
}

TEST(TokenMask, MatchesBruteForceOnLlamaVocabulary) {
  VELA_REQUIRE_SHARED();
  auto gguf = GgufFile::open(vela::test::shared_path("models/tiny-llama-gqa.gguf").string());
  ASSERT_TRUE(gguf) << gguf.message();
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok) << tok.message();
  auto vocab = TokenVocabulary::from_tokenizer(*tok);
  ASSERT_EQ(vocab->n_vocab(), 32000);
  random_walks(vocab, 2, 20, /*every_token=*/false);
}

TEST(TokenMask, RejectedTokensNeverAccepted) {
  auto g = compile_spec(json_spec(R"({"type":"boolean"})"));
  ASSERT_TRUE(g);
  SequenceConstraint seq(*g);
  const auto& vocab = (*g)->vocab();
  int32_t f = -1, x = -1;
  for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
    if (vocab.piece(id) == "false") f = id;
    if (vocab.piece(id) == "x") x = id;
  }
  EXPECT_FALSE(seq.allows(x));
  EXPECT_FALSE(seq.accept(x));
  EXPECT_FALSE(seq.allows(0));  // end of generation before a value
  ASSERT_TRUE(seq.accept(f));
  EXPECT_TRUE(seq.accepting());
  EXPECT_TRUE(seq.finished());
  EXPECT_TRUE(seq.allows(0));
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(Hostile, DeepNestingHugeEnumsAndLargeSchemasAreBounded) {
  // 100 levels of nested arrays compile; 200 are refused.
  std::string deep = R"({"type":"integer"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  auto t = std::chrono::steady_clock::now();
  auto g = compile_spec(json_spec(deep));
  EXPECT_TRUE(g) << g.message();
  std::string deeper = R"({"type":"integer"})";
  for (int i = 0; i < 200; ++i) deeper = R"({"type":"array","items":)" + deeper + "}";
  EXPECT_FALSE(compile_spec(json_spec(deeper)));

  // 20,000 enum values.
  nlohmann::json e = nlohmann::json::array();
  for (int i = 0; i < 20000; ++i) e.push_back("value-" + std::to_string(i));
  auto big_enum = compile_spec(json_spec(nlohmann::json{{"enum", e}}.dump()));
  ASSERT_TRUE(big_enum) << big_enum.message();
  SequenceConstraint seq(*big_enum);
  EXPECT_FALSE(seq.mask().empty());

  // A 1 MB schema: many properties; compiles or is refused, either way in bounded time. (A
  // quarter of it under a sanitizer, which checks the same paths at many times the cost.)
#ifdef VELA_SANITIZER_BUILD
  constexpr size_t kSchemaBytes = 1u << 18;
#else
  constexpr size_t kSchemaBytes = 1u << 20;
#endif
  nlohmann::json props = nlohmann::json::object();
  for (size_t i = 0, size = 0; size < kSchemaBytes; ++i) {
    const std::string key = "property_number_" + std::to_string(i);
    props[key] = {{"type", "string"}, {"maxLength", 8}};
    size += key.size() + 40;  // the member's length in the dump
  }
  auto large =
      compile_spec(json_spec(nlohmann::json{{"type", "object"}, {"properties", props}}.dump()));
  if (large) {
    SequenceConstraint s(*large);
    EXPECT_FALSE(s.mask().empty());
  }
  // A nested repetition bomb shares its rules (a^(10^9) in a few thousand elements); a flat
  // one over the element limit is refused.
  StructuredOutputs bomb;
  bomb.regex = "((a{1000}){1000}){1000}";
  auto nested = compile_spec(bomb);
  ASSERT_TRUE(nested) << nested.message();
  EXPECT_LT((*nested)->grammar().elements.size(), 10000u);
  std::string flat;
  for (int i = 0; i < 21; ++i) flat += "a{100000}";  // 2.1 million elements in one sequence
  bomb.regex = flat;
  EXPECT_FALSE(compile_spec(bomb));
  EXPECT_LT(seconds_since(t), 120.0);
}

}  // namespace
}  // namespace vela::constraint::test
