// POST /tokenize and /detokenize (vLLM's shapes, chat messages through the template) and
// GET /v1/models/{id}, through curl against the real server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

constexpr const char* kChatMl =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

json parse(const HttpResult& r) {
  json j = json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.body;
  return j;
}

TEST(TokenizeEndpoints, RoundTripsTextAndChatMessages) {
  VELA_REQUIRE_SHARED();
  const auto template_path = temp_file("chatml");
  write_file(template_path, kChatMl);
  auto s = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string(),
                                 "--chat-template", template_path.string(), "--ctx-size", "512"});

  const HttpResult plain = s->post("/tokenize", R"({"prompt":"Once upon a time"})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json t = parse(plain);
  ASSERT_TRUE(t["tokens"].is_array());
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_GE(t["count"].get<int>(), 3);
  EXPECT_EQ(t["max_model_len"], 512);
  EXPECT_TRUE(t["token_strs"].is_null());

  // Without special tokens, detokenize gives the text back.
  const json bare = parse(s->post(
      "/tokenize",
      R"({"prompt":"Once upon a time","add_special_tokens":false,"return_token_strs":true})"));
  EXPECT_EQ(bare["count"].get<int>() + 1, t["count"].get<int>()) << "BOS added by default";
  EXPECT_EQ(bare["token_strs"].size(), bare["tokens"].size());
  const HttpResult back = s->post("/detokenize", json{{"tokens", bare["tokens"]}}.dump());
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(parse(back)["prompt"], "Once upon a time");

  // Chat messages are rendered by the template first: the count matches tokenizing the
  // rendered text.
  const json messages = json::array({{{"role", "user"}, {"content", "Hi there"}}});
  const json chat = parse(s->post("/tokenize", json{{"messages", messages}}.dump()));
  const std::string rendered = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n";
  const json direct =
      parse(s->post("/tokenize", json{{"prompt", rendered}, {"add_special_tokens", false}}.dump()));
  EXPECT_EQ(chat["tokens"], direct["tokens"]);
  const json no_gen = parse(
      s->post("/tokenize", json{{"messages", messages}, {"add_generation_prompt", false}}.dump()));
  EXPECT_LT(no_gen["count"].get<int>(), chat["count"].get<int>());

  // Hostile input: a clear 400 each, and the server keeps serving.
  EXPECT_EQ(s->post("/tokenize", "{").status, 400);
  EXPECT_EQ(s->post("/tokenize", R"({"prompt":5})").status, 400);
  EXPECT_EQ(s->post("/tokenize", R"({"messages":[{"role":"user"}]})").status, 400);
  EXPECT_EQ(s->post("/detokenize", R"({"tokens":[1,-2]})").status, 400);
  EXPECT_EQ(s->post("/detokenize", R"({"tokens":[99999999]})").status, 400);
  EXPECT_EQ(s->post("/detokenize", R"({"tokens":"abc"})").status, 400);
  EXPECT_EQ(s->post("/tokenize", R"({"prompt":"x","model":"other"})").status, 404);
  EXPECT_EQ(s->get("/tokenize").status, 405);
  std::filesystem::remove(template_path);
}

TEST(TokenizeEndpoints, ModelById) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string(),
                                 "--served-model-name", "org/dreamer"});
  const HttpResult one = s->get("/v1/models/org%2Fdreamer");
  ASSERT_EQ(one.status, 200) << one.body;
  const json m = parse(one);
  EXPECT_EQ(m["id"], "org/dreamer");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(parse(s->get("/v1/models"))["data"][0], m);
  const HttpResult missing = s->get("/v1/models/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(parse(missing)["error"]["code"], "model_not_found");
}

}  // namespace
}  // namespace vela::test
