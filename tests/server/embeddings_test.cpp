// POST /v1/embeddings against the real server: OpenAI's response shape, unit-length vectors,
// the same vector for an input alone or in a batch, across prefill chunk sizes and on a repeat
// (no prefix-cache shortcut), for text and token-id input; mean and last-token pooling differ.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

std::vector<std::vector<float>> embed(const ServerProcess& s, const json& input) {
  const HttpResult r = s.post("/v1/embeddings", json{{"input", input}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  std::vector<std::vector<float>> out;
  if (j.is_discarded() || !j.contains("data")) {
    ADD_FAILURE() << r.body;
    return out;
  }
  EXPECT_EQ(j["object"], "list");
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"]);
  for (size_t i = 0; i < j["data"].size(); ++i) {
    EXPECT_EQ(j["data"][i]["object"], "embedding");
    EXPECT_EQ(j["data"][i]["index"], i);
    out.push_back(j["data"][i]["embedding"].get<std::vector<float>>());
  }
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

std::string long_text() {
  std::string t;
  for (int i = 0; i < 12; ++i) t += "The little dog ran to the park and saw a big red ball. ";
  return t;
}

TEST(Embeddings, ShapeNormAndInvariance) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path(), "--ctx-size", "1024"});
  const std::vector<std::string> texts = {"Once upon a time", "A big red ball", long_text()};
  const auto batch = embed(*s, texts);
  ASSERT_EQ(batch.size(), 3u);
  for (const auto& v : batch) {
    ASSERT_FALSE(v.empty());
    double norm = 0;
    for (float x : v) norm += double(x) * x;
    EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-4);
  }
  EXPECT_GT(max_abs_diff(batch[0], batch[1]), 1e-3) << "different texts, same vector";
  // Alone, or again (its blocks are now in the prefix cache), the vector is the same.
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto alone = embed(*s, texts[i]);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_LT(max_abs_diff(alone[0], batch[i]), 1e-5) << texts[i];
  }
  // Token ids give the same as the text they tokenize to.
  const json tokens =
      json::parse(s->post("/tokenize", json{{"prompt", texts[0]}}.dump()).body)["tokens"];
  const auto by_ids = embed(*s, tokens);
  ASSERT_EQ(by_ids.size(), 1u);
  EXPECT_LT(max_abs_diff(by_ids[0], batch[0]), 1e-5);

  // Prefill in chunks of 16 tokens: the mean over several steps is the same vector.
  auto chunked = ServerProcess::start(
      {"-m", model_path(), "--ctx-size", "1024", "--max-num-batched-tokens", "16"});
  const auto in_chunks = embed(*chunked, texts[2]);
  ASSERT_EQ(in_chunks.size(), 1u);
  EXPECT_LT(max_abs_diff(in_chunks[0], batch[2]), 1e-4);

  // Last-token pooling is another vector, and also unit length.
  auto last = ServerProcess::start(
      {"-m", model_path(), "--ctx-size", "1024", "--embedding-pooling", "last"});
  const auto by_last = embed(*last, texts[2]);
  ASSERT_EQ(by_last.size(), 1u);
  EXPECT_GT(max_abs_diff(by_last[0], batch[2]), 1e-3);
  const auto last_chunked_server =
      ServerProcess::start({"-m", model_path(), "--ctx-size", "1024", "--embedding-pooling", "last",
                            "--max-num-batched-tokens", "16"});
  const auto last_chunked = embed(*last_chunked_server, texts[2]);
  ASSERT_EQ(last_chunked.size(), 1u);
  EXPECT_LT(max_abs_diff(last_chunked[0], by_last[0]), 1e-4);

  // Errors name the problem; generation keeps working beside embeddings.
  EXPECT_EQ(s->post("/v1/embeddings", R"({"input":[]})").status, 400);
  EXPECT_EQ(s->post("/v1/embeddings", R"({"input":[1,-5]})").status, 400);
  EXPECT_EQ(s->post("/v1/embeddings", R"({"input":"x","dimensions":8})").status, 400);
  EXPECT_EQ(s->post("/v1/embeddings", R"({"input":"x","encoding_format":"hex"})").status, 400);
  EXPECT_EQ(s->post("/v1/embeddings", R"({"input":"x","model":"other"})").status, 404);
  EXPECT_EQ(s->post("/v1/embeddings", R"({"input":"")").status, 400);
  EXPECT_EQ(s->post("/v1/completions", R"({"prompt":"Hi","max_tokens":2})").status, 200);
}

}  // namespace
}  // namespace vela::test
