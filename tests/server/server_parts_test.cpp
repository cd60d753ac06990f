// Small parts of the server: API-key checks, the KV budget, the access-log line, and the
// OpenAI response shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/engine_factory.h"
#include "server/access_log.h"
#include "server/auth.h"
#include "server/engine_setup.h"
#include "server/openai_response.h"
#include "support/shared_data.h"

namespace vela::server {
namespace {

using json = nlohmann::json;

TEST(Auth, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("secret", ""));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST(Auth, BearerHeader) {
  const ApiKeys none;
  EXPECT_TRUE(none.check(""));  // auth off
  const ApiKeys keys({"k1", "k2"});
  EXPECT_TRUE(keys.check("Bearer k1"));
  EXPECT_TRUE(keys.check("bearer k2"));
  EXPECT_TRUE(keys.check("Bearer  k1 "));
  EXPECT_FALSE(keys.check(""));
  EXPECT_FALSE(keys.check("k1"));
  EXPECT_FALSE(keys.check("Bearer"));
  EXPECT_FALSE(keys.check("Bearer "));
  EXPECT_FALSE(keys.check("Bearer k3"));
  EXPECT_FALSE(keys.check("Basic k1"));
  EXPECT_FALSE(keys.check("Bearer k1k2"));
}

TEST(Auth, KeyFile) {
  const std::string path = test::unique_temp_path("keys.txt");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("# comment\n\n  alpha \nbeta\n", f);
    std::fclose(f);
  }
  auto keys = read_api_key_file(path);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, (std::vector<std::string>{"alpha", "beta"}));
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("# only a comment\n", f);
    std::fclose(f);
  }
  EXPECT_FALSE(read_api_key_file(path).ok());
  EXPECT_FALSE(read_api_key_file(path + ".missing").ok());
  std::remove(path.c_str());
}

TEST(KvBudget, BytesFractionAndDefault) {
  KvBudgetInput in;
  in.bytes_per_block = 1000;
  in.max_num_seqs = 4;
  in.max_context = 100;  // 7 blocks of 16
  in.block_size = 16;
  in.mem_available = 1'000'000;
  EXPECT_EQ(*kv_block_budget(in), 28);  // full demand fits under the default cap
  in.max_num_seqs = 1000;
  EXPECT_EQ(*kv_block_budget(in), 250);  // capped at 0.25 of MemAvailable
  in.kv_cache_bytes = 12'345;
  EXPECT_EQ(*kv_block_budget(in), 12);
  in.kv_cache_bytes.reset();
  in.kv_cache_fraction = 0.5;
  EXPECT_EQ(*kv_block_budget(in), 500);
  in.kv_cache_bytes = 5000;
  EXPECT_FALSE(kv_block_budget(in).ok());  // both given
  in.kv_cache_bytes.reset();
  in.kv_cache_fraction = 1.5;
  EXPECT_FALSE(kv_block_budget(in).ok());
  in.kv_cache_fraction.reset();
  in.kv_cache_bytes = 999;  // not even one block
  EXPECT_FALSE(kv_block_budget(in).ok());
  in.kv_cache_bytes.reset();
  in.mem_available.reset();
  EXPECT_EQ(*kv_block_budget(in), 7000);  // unknown memory: the full demand
  in.kv_cache_fraction = 0.5;
  EXPECT_FALSE(kv_block_budget(in).ok());
  EXPECT_TRUE(mem_available_bytes().has_value());  // Linux
}

TEST(AccessLog, OneJsonLine) {
  AccessRecord r;
  r.id = "cmpl-1";
  r.remote = "127.0.0.1:5";
  r.method = "POST";
  r.path = "/v1/completions\xff";
  r.status = 200;
  r.prompt_tokens = 3;
  r.completion_tokens = 4;
  r.ttft_ms = 1.23456;
  r.e2e_ms = 9.0;
  r.stream = true;
  const std::string line = format_access_log(r);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const json j = json::parse(line);
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["prompt_tokens"], 3);
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 1.235);
  EXPECT_TRUE(j["ts"].get<std::string>().ends_with("Z"));
  AccessRecord plain;
  plain.status = 404;
  const json p = json::parse(format_access_log(plain));
  EXPECT_TRUE(p["id"].is_null());
  EXPECT_FALSE(p.contains("prompt_tokens"));
}

TEST(OpenAiResponse, Shapes) {
  ResponseMeta meta{Endpoint::kChatCompletions, "chatcmpl-1", 42, "m"};
  const json first = stream_chunk(meta, 0, "", true, nullptr, nullptr, false);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_FALSE(first.contains("usage"));
  const json last = stream_chunk(meta, 1, "", false, nullptr, "stop", true);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last["usage"].is_null());
  const json u = usage_chunk(meta, usage_json(3, 4, 1));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 7);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 1);

  std::vector<TokenLogprobs> lps = {{5, "ab", -0.5f, {{5, "ab", -0.5f}, {6, "x", -1.0f}}},
                                    {7, "\xe4", -0.25f, {}}};
  int64_t offset = 10;
  const json c = completion_logprobs(lps, offset);
  EXPECT_EQ(c["text_offset"], (json{10, 12}));
  EXPECT_EQ(offset, 13);
  EXPECT_EQ(c["top_logprobs"][0]["x"], -1.0);
  const json ch = chat_logprobs(lps);
  EXPECT_EQ(ch["content"][1]["bytes"], (json{0xe4}));
  EXPECT_EQ(ch["content"][0]["top_logprobs"].size(), 2u);
  // A token that is part of a UTF-8 character serialises (as U+FFFD) instead of throwing.
  EXPECT_NE(dump_json(c).find("\xef\xbf\xbd"), std::string::npos);
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");

  const json whole = full_response(
      ResponseMeta{Endpoint::kCompletions, "cmpl-2", 1, "m"},
      json::array({response_choice(Endpoint::kCompletions, 0, "hi", nullptr, "length")}),
      usage_json(1, 1, 0));
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["choices"][0]["text"], "hi");
  const json models = models_list("m", 5, 128);
  EXPECT_EQ(models["data"][0]["id"], "m");
}

}  // namespace
}  // namespace vela::server
