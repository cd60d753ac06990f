// /v1/chat/completions through `vela serve --chat-template FILE` (aidreams260K has no template
// of its own): whole and streamed answers, logprobs, content parts, template errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

// ChatML written the way model hubs write it.
constexpr const char* kChatMl =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

json parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text;
  return j;
}

class ServerChat : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (shared_dir().empty()) return;
    template_path_ = new std::filesystem::path(temp_file("chatml"));
    write_file(*template_path_, kChatMl);
    server_ = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string(),
                                    "--chat-template", template_path_->string(),
                                    "--served-model-name", "dreamer"})
                  .release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (template_path_) std::filesystem::remove(*template_path_);
    delete template_path_;
    template_path_ = nullptr;
  }
  void SetUp() override {
    VELA_REQUIRE_SHARED();
    ASSERT_TRUE(server_ != nullptr && server_->port() != 0);
  }
  static ServerProcess* server_;
  static std::filesystem::path* template_path_;
};
ServerProcess* ServerChat::server_ = nullptr;
std::filesystem::path* ServerChat::template_path_ = nullptr;

const std::string kMessages =
    R"("messages":[{"role":"system","content":"You dream."},{"role":"user","content":"Tell me a story"}])";

TEST_F(ServerChat, WholeAnswer) {
  const HttpResult r =
      server_->post("/v1/chat/completions", "{\"model\":\"dreamer\"," + kMessages +
                                                R"(,"max_completion_tokens":12,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "dreamer");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  // The rendered ChatML prompt is much longer than the raw text.
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 30);

  // Deterministic, and the served name is the only model accepted.
  const HttpResult again = server_->post("/v1/chat/completions",
                                         "{" + kMessages + R"(,"max_tokens":12,"temperature":0})");
  EXPECT_EQ(parse(again.body)["choices"][0]["message"], j["choices"][0]["message"]);
  EXPECT_EQ(server_->post("/v1/chat/completions", "{\"model\":\"aidreams260K\"," + kMessages + "}")
                .status,
            404);
}

TEST_F(ServerChat, StreamedAnswerMatchesWhole) {
  const std::string base = "{" + kMessages + R"(,"max_tokens":16,"temperature":0)";
  const json whole = parse(server_->post("/v1/chat/completions", base + "}").body);
  const HttpResult r = server_->post("/v1/chat/completions", base + R"(,"stream":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  bool framing_ok = false;
  const auto events = sse_events(r.body, &framing_ok);
  EXPECT_TRUE(framing_ok);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json first = parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json c = parse(events[i]);
    EXPECT_FALSE(c.contains("usage")) << "no usage field without include_usage";
    const json& choice = c["choices"][0];
    if (choice["delta"].contains("content"))
      content += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(content, whole["choices"][0]["message"]["content"]);
}

TEST_F(ServerChat, LogprobsAndContentParts) {
  const HttpResult r = server_->post(
      "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"Tell me"},{"type":"text","text":"a story"}]}],
          "max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = parse(r.body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["content"].size(), 6u) << r.body;
  for (const json& t : lp["content"]) {
    EXPECT_TRUE(t["token"].is_string());
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_TRUE(t["bytes"].is_array());
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
  }
  EXPECT_EQ(server_
                ->post("/v1/chat/completions",
                       R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})")
                .status,
            400);
  EXPECT_EQ(
      server_
          ->post(
              "/v1/chat/completions",
              R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})")
          .status,
      400);
}

TEST(ServerChatStartup, UnusableTemplateFileStopsTheServer) {
  VELA_REQUIRE_SHARED();
  const auto path = temp_file("bad_template");
  write_file(path, "{% for %}");
  auto server = ServerProcess::start(
      {"-m", shared_path("models/aidreams260K.gguf").string(), "--chat-template", path.string()},
      /*wait_ready=*/false);
  EXPECT_EQ(server->wait_exit(30), 1);
  EXPECT_NE(server->log().find("--chat-template"), std::string::npos) << server->log();
  std::filesystem::remove(path);
}

// A copy of aidreams260K whose metadata carries `chat_template` (the model has none).
std::filesystem::path model_with_template(const std::string& chat_template) {
  auto src = GgufFile::open(shared_path("models/aidreams260K.gguf").string());
  EXPECT_TRUE(src.ok());
  GgufWriter w(src->version());
  for (const auto& [key, value] : src->metadata())
    if (key != "tokenizer.chat_template") w.add_value(key, value);
  w.add_string("tokenizer.chat_template", chat_template);
  for (const GgufTensorInfo& t : src->tensors()) {
    const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type(), ne, {t.data, size_t(t.n_bytes)}).ok());
  }
  const auto path = temp_file("templated_model");
  EXPECT_TRUE(w.write_file(path.string()).ok());
  return path;
}

TEST(ServerChatModelTemplate, UsesTheTemplateInTheModelFile) {
  VELA_REQUIRE_SHARED();
  // Mistral's template: only user/assistant, alternating, else raise_exception.
  const std::string mistral =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
      "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
      "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
      "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' "
      "%}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and "
      "assistant roles are supported!') }}{% endif %}{% endfor %}";
  const auto path = model_with_template(mistral);
  auto s = ServerProcess::start({"-m", path.string(), "--served-model-name", "m"});
  const std::string user = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4})";
  const std::string two_users =
      R"({"messages":[{"role":"user","content":"Hi"},{"role":"user","content":"Again"}]})";
  if (s->log().find("Jinja engine") != std::string::npos) {
    EXPECT_NE(s->log().find("chat template from the model"), std::string::npos) << s->log();
    const HttpResult ok = s->post("/v1/chat/completions", user);
    EXPECT_EQ(ok.status, 200) << ok.body;
    const HttpResult raised = s->post("/v1/chat/completions", two_users);
    EXPECT_EQ(raised.status, 400) << raised.body;
    EXPECT_NE(raised.body.find("Conversation roles must alternate"), std::string::npos)
        << raised.body;
  } else {
    // The built-in subset cannot run this template: chat is refused with the reason.
    const HttpResult r = s->post("/v1/chat/completions", user);
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("chat_template_missing"), std::string::npos) << r.body;
  }
  s.reset();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vela::test
