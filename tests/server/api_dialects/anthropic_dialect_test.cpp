// Anthropic's Messages API as a dialect of chat completions: the request's translation (checked
// again by the chat parser the handler runs), the whole answer, error shapes, and the event
// stream that scripted chat chunk sequences become.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../named_events.h"
#include "server/api_dialects/anthropic_dialect.h"
#include "server/generation_request.h"

namespace vela::server {
namespace {

using json = nlohmann::json;

// The chat request for `body`, which must translate and pass the chat parser.
json translate(const json& body, AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  json chat;
  const auto error = anthropic_chat_request(body.dump(), endpoint, chat);
  EXPECT_FALSE(error) << error->message;
  GenerationRequest parsed;
  const auto chat_error =
      parse_generation_request(chat.dump(), Endpoint::kChatCompletions, RequestLimits{}, parsed);
  EXPECT_FALSE(chat_error) << chat_error->message << "\n" << chat.dump();
  return chat;
}

// The 400 for `body`; its message must contain `needle`.
void expect_refused(const json& body, const std::string& needle,
                    AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  json chat;
  const auto error = anthropic_chat_request(body.dump(), endpoint, chat);
  ASSERT_TRUE(error) << body.dump();
  EXPECT_EQ(error->status, 400);
  EXPECT_NE(error->message.find(needle), std::string::npos) << error->message;
}

// The messages as a vector: `base({user(...)})` is then one array on every compiler (a braced
// single json converts to a json itself under clang, an array under GCC).
json base(std::vector<json> messages) {
  return json{{"model", "m"}, {"max_tokens", 64}, {"messages", json(std::move(messages))}};
}

json user(json content) {
  return json{{"role", "user"}, {"content", std::move(content)}};
}

TEST(AnthropicRequest, SystemStringAndBlocks) {
  json body = base({user("Hi")});
  body["system"] = "Be brief.";
  json chat = translate(body);
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["max_tokens"], 64);
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Hi"}])"));
  EXPECT_FALSE(chat.contains("stream"));

  body["system"] = json::parse(R"([{"type": "text", "text": "One."},
      {"type": "text", "text": "Two.", "cache_control": {"type": "ephemeral"}}])");
  chat = translate(body);
  EXPECT_EQ(chat["messages"][0], json({{"role", "system"}, {"content", "One.\nTwo."}}));

  body["system"] = json::parse(R"([{"type": "image", "source": {}}])");
  expect_refused(body, "text only");
  body["system"] = 3;
  expect_refused(body, "system");
}

TEST(AnthropicRequest, ToolUseAndToolResultRoundTrip) {
  json body = base(json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "Use the tool.", "signature": "sig"},
      {"type": "redacted_thinking", "data": "xyz"},
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
      {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}}]},
    {"role": "user", "content": [
      {"type": "text", "text": "Here you go."},
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
      {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
       "content": [{"type": "text", "text": "no clock"}]}]}
  ])")
                       .get<std::vector<json>>());
  body["tools"] = json::parse(R"([
    {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object",
      "properties": {"city": {"type": "string"}}}},
    {"name": "get_time", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
  ])");
  const json chat = translate(body);
  const json& m = chat["messages"];
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0], json({{"role", "user"}, {"content", "Weather in Paris?"}}));
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["content"], "Checking.");
  EXPECT_EQ(m[1]["reasoning_content"], "Use the tool.");
  ASSERT_EQ(m[1]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(m[1]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m[1]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["arguments"], "{}");
  // The results come first, in order, as tool messages; then the user's text.
  EXPECT_EQ(m[2], json({{"role", "tool"},
                        {"tool_call_id", "toolu_1"},
                        {"name", "get_weather"},
                        {"content", "18C"}}));
  EXPECT_EQ(m[3], json({{"role", "tool"},
                        {"tool_call_id", "toolu_2"},
                        {"name", "get_time"},
                        {"content", "Error: no clock"}}));
  EXPECT_EQ(m[4], json({{"role", "user"}, {"content", "Here you go."}}));
  EXPECT_EQ(chat["tools"], json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
  ])"));

  // A turn of tool results only adds no user message.
  body["messages"][2]["content"].erase(0);
  EXPECT_EQ(translate(body)["messages"].size(), 4u);
}

TEST(AnthropicRequest, ThinkingConfig) {
  json body = base({user("Hi")});
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  json chat = translate(body);
  EXPECT_EQ(chat["chat_template_kwargs"], json({{"enable_thinking", true}}));
  EXPECT_EQ(chat["max_reasoning_tokens"], 1024);
  body["thinking"] = {{"type", "disabled"}};
  chat = translate(body);
  EXPECT_EQ(chat["chat_template_kwargs"], json({{"enable_thinking", false}}));
  EXPECT_FALSE(chat.contains("max_reasoning_tokens"));
  body["thinking"] = {{"type", "adaptive"}};
  EXPECT_EQ(translate(body)["chat_template_kwargs"], json({{"enable_thinking", true}}));
  body["thinking"] = {{"type", "enabled"}};
  expect_refused(body, "budget_tokens");
  body["thinking"] = {{"type", "sometimes"}};
  expect_refused(body, "'thinking' must be");
}

TEST(AnthropicRequest, ToolChoiceVariants) {
  json body = base({user("Hi")});
  body["tools"] = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}}])");
  const std::vector<std::pair<json, std::pair<json, json>>> cases = {
      {{{"type", "auto"}}, {"auto", nullptr}},
      {{{"type", "any"}}, {"required", nullptr}},
      {{{"type", "none"}}, {"none", nullptr}},
      {{{"type", "tool"}, {"name", "f"}},
       {{{"type", "function"}, {"function", {{"name", "f"}}}}, nullptr}},
      {{{"type", "auto"}, {"disable_parallel_tool_use", true}}, {"auto", false}},
      {{{"type", "any"}, {"disable_parallel_tool_use", false}}, {"required", true}},
  };
  for (const auto& [choice, want] : cases) {
    SCOPED_TRACE(choice.dump());
    body["tool_choice"] = choice;
    const json chat = translate(body);
    EXPECT_EQ(chat["tool_choice"], want.first);
    EXPECT_EQ(chat.value("parallel_tool_calls", json(nullptr)), want.second);
  }
  body["tool_choice"] = {{"type", "tool"}};
  expect_refused(body, "tool_choice");
  body["tool_choice"] = "auto";
  expect_refused(body, "tool_choice");
  body.erase("tool_choice");
  body["tools"] = json::parse(R"([{"type": "web_search_20250305", "name": "web_search"}])");
  expect_refused(body, "web_search_20250305");
  body["tools"] = json::parse(R"([{"name": "f"}])");
  expect_refused(body, "input_schema");
}

TEST(AnthropicRequest, SamplingStreamAndMetadata) {
  json body = base({user("Hi")});
  body["stop_sequences"] = {"END", "\n\n"};
  body["temperature"] = 0.5;
  body["top_p"] = 0.9;
  body["top_k"] = 40;
  body["stream"] = true;
  body["metadata"] = {{"user_id", "u-1"}};
  body["vela_test_script"] = {{"pieces", json::array({"a"})}};
  const json chat = translate(body);
  EXPECT_EQ(chat["stop"], json({"END", "\n\n"}));
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_p"], 0.9);
  EXPECT_EQ(chat["top_k"], 40);
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"], json({{"include_usage", true}}));
  EXPECT_EQ(chat["user"], "u-1");
  EXPECT_EQ(chat["vela_test_script"], body["vela_test_script"]);
  body["metadata"] = {{"tenant", "x"}};
  expect_refused(body, "metadata.tenant");
  body.erase("metadata");
  body["stop_sequences"] = "END";
  expect_refused(body, "stop_sequences");
}

TEST(AnthropicRequest, RefusesWhatItCannotServe) {
  json body = base({user("Hi")});
  body.erase("max_tokens");
  expect_refused(body, "'max_tokens' is required");
  body["max_tokens"] = 0;
  expect_refused(body, "max_tokens");
  body["max_tokens"] = 8;
  body.erase("model");
  expect_refused(body, "model");
  body["model"] = "m";
  body["frequency_penalty"] = 1;
  expect_refused(body, "unknown field 'frequency_penalty'");
  body.erase("frequency_penalty");

  body["messages"] = json::array({json{{"role", "system"}, {"content", "x"}}});
  expect_refused(body, "role 'system'");
  body["messages"] = json::array({user(json::array({json{{"type", "video"}, {"url", "x"}}}))});
  expect_refused(body, "'video'");
  body["messages"] = json::array({user(
      json::array({json{{"type", "image"}, {"source", {{"type", "base64"}, {"data", "AAAA"}}}}}))});
  expect_refused(body, "this model takes text only");
  body["messages"] = json::array({user(json::array(
      {json{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}, {"input", json::object()}}}))});
  expect_refused(body, "'tool_use'");
  body["messages"] = json::array({json{
      {"role", "assistant"}, {"content", json::array({json{{"type", "tool_use"}, {"id", "a"}}})}}});
  expect_refused(body, "tool_use block needs");
  body["messages"] = json::array({user("Hi"), json{{"role", "assistant"}, {"content", "Well,"}}});
  expect_refused(body, "prefill");
  body["messages"] = json::array();
  expect_refused(body, "messages");
  expect_refused(json::array(), "JSON object");

  json chat;
  const auto error = anthropic_chat_request("{not json", AnthropicEndpoint::kMessages, chat);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 400);
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  json body = base({user("Hi")});
  body.erase("max_tokens");
  body["stream"] = true;
  const json chat = translate(body, AnthropicEndpoint::kCountTokens);
  EXPECT_FALSE(chat.contains("max_tokens"));
  EXPECT_FALSE(chat.contains("stream"));
}

const json kChatResponse = json::parse(R"({
  "id": "chatcmpl-abc", "object": "chat.completion", "created": 1, "model": "m",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "Let me look.",
    "reasoning_content": "Weather needs a tool.",
    "tool_calls": [{"id": "call_x1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
    "logprobs": null, "finish_reason": "tool_calls", "stop_reason": null}],
  "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42,
            "prompt_tokens_details": {"cached_tokens": 16}}})");

TEST(AnthropicResponse, BlocksStopReasonAndUsage) {
  AnthropicDialect d;
  const json r = d.from_chat_response(kChatResponse);
  EXPECT_EQ(r, json::parse(R"({
    "id": "msg_abc", "type": "message", "role": "assistant", "model": "m",
    "content": [
      {"type": "thinking", "thinking": "Weather needs a tool.", "signature": ""},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_x1", "name": "get_weather",
       "input": {"city": "Paris", "days": 2}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 14, "output_tokens": 12, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 16}})"));

  json plain = kChatResponse;
  json& choice = plain["choices"][0];
  choice["message"] = {{"role", "assistant"}, {"content", "Done"}};
  choice["finish_reason"] = "stop";
  json out = d.from_chat_response(plain);
  EXPECT_EQ(out["content"], json::parse(R"([{"type": "text", "text": "Done"}])"));
  EXPECT_EQ(out["stop_reason"], "end_turn");
  EXPECT_TRUE(out["stop_sequence"].is_null());
  choice["stop_reason"] = "END";
  out = d.from_chat_response(plain);
  EXPECT_EQ(out["stop_reason"], "stop_sequence");
  EXPECT_EQ(out["stop_sequence"], "END");
  choice["finish_reason"] = "length";
  choice["stop_reason"] = nullptr;
  choice["message"]["content"] = nullptr;
  out = d.from_chat_response(plain);
  EXPECT_EQ(out["stop_reason"], "max_tokens");
  EXPECT_EQ(out["content"], json::array());
}

TEST(AnthropicResponse, ErrorShapes) {
  AnthropicDialect d;
  const std::vector<std::pair<int, const char*>> cases = {
      {400, "invalid_request_error"}, {401, "authentication_error"},
      {403, "permission_error"},      {404, "not_found_error"},
      {405, "invalid_request_error"}, {413, "request_too_large"},
      {429, "rate_limit_error"},      {500, "api_error"},
      {503, "overloaded_error"},      {529, "overloaded_error"},
      {504, "timeout_error"}};
  for (const auto& [status, type] : cases) {
    SCOPED_TRACE(status);
    const json openai = {{"error",
                          {{"message", "why " + std::to_string(status)},
                           {"type", "whatever"},
                           {"param", nullptr},
                           {"code", nullptr}}}};
    EXPECT_EQ(d.error_json(status, openai),
              json({{"type", "error"},
                    {"error", {{"type", type}, {"message", "why " + std::to_string(status)}}}}));
  }
}

using Event = test::NamedEvent;
using test::parse_named_events;

json chunk(json delta, json finish = nullptr, json stop_reason = nullptr) {
  json choice = {{"index", 0},
                 {"delta", std::move(delta)},
                 {"logprobs", nullptr},
                 {"finish_reason", std::move(finish)}};
  if (!choice["finish_reason"].is_null()) choice["stop_reason"] = std::move(stop_reason);
  return json{
      {"id", "chatcmpl-s1"}, {"object", "chat.completion.chunk"},           {"created", 1},
      {"model", "m"},        {"choices", json::array({std::move(choice)})}, {"usage", nullptr}};
}

json usage_chunk(int prompt, int completion, int cached) {
  return json{{"id", "chatcmpl-s1"},
              {"object", "chat.completion.chunk"},
              {"choices", json::array()},
              {"usage",
               {{"prompt_tokens", prompt},
                {"completion_tokens", completion},
                {"total_tokens", prompt + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}}}};
}

// The events a dialect writes for `chunks` then the stream's end.
std::vector<Event> run_stream(const std::vector<json>& chunks, int64_t prompt_tokens = 11) {
  AnthropicDialect d;
  d.set_prompt_tokens(prompt_tokens);
  std::string text;
  for (const json& c : chunks) text += d.stream_chunk(c);
  text += d.stream_end();
  EXPECT_EQ(d.stream_end(), "");  // once only
  return parse_named_events(text);
}

std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.name);
  return out;
}

TEST(AnthropicStream, Text) {
  const auto events = run_stream({chunk({{"role", "assistant"}, {"content", ""}}),
                                  chunk({{"content", "Hel"}}), chunk({{"content", "lo"}}),
                                  chunk(json::object(), "stop"), usage_chunk(11, 2, 0)});
  EXPECT_EQ(names(events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  const json& msg = events[0].data["message"];
  EXPECT_EQ(msg["id"], "msg_s1");
  EXPECT_EQ(msg["model"], "m");
  EXPECT_EQ(msg["content"], json::array());
  EXPECT_EQ(msg["usage"]["input_tokens"], 11);
  EXPECT_EQ(events[2].data["index"], 0);
  EXPECT_EQ(events[2].data["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[3].data["delta"], json({{"type", "text_delta"}, {"text", "Hel"}}));
  EXPECT_EQ(events[4].data["delta"]["text"], "lo");
  EXPECT_EQ(events[5].data["index"], 0);
  EXPECT_EQ(events[6].data["delta"],
            json({{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}));
  EXPECT_EQ(events[6].data["usage"]["output_tokens"], 2);
  EXPECT_EQ(events[6].data["usage"]["input_tokens"], 11);
}

TEST(AnthropicStream, ThinkingThenTextThenStopSequence) {
  const auto events = run_stream(
      {chunk({{"role", "assistant"}, {"content", ""}}), chunk({{"reasoning_content", "Hmm"}}),
       chunk({{"reasoning_content", "."}}), chunk({{"content", "Answer"}}),
       chunk(json::object(), "stop", "END"), usage_chunk(20, 7, 8)});
  EXPECT_EQ(names(events), (std::vector<std::string>{
                               "message_start", "ping", "content_block_start",
                               "content_block_delta", "content_block_delta", "content_block_delta",
                               "content_block_stop", "content_block_start", "content_block_delta",
                               "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[2].data["content_block"],
            json({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}));
  EXPECT_EQ(events[3].data["delta"], json({{"type", "thinking_delta"}, {"thinking", "Hmm"}}));
  EXPECT_EQ(events[4].data["delta"]["thinking"], ".");
  EXPECT_EQ(events[5].data["delta"], json({{"type", "signature_delta"}, {"signature", ""}}));
  for (int i = 2; i <= 6; ++i) EXPECT_EQ(events[size_t(i)].data["index"], 0);
  EXPECT_EQ(events[7].data["content_block"]["type"], "text");
  for (int i = 7; i <= 9; ++i) EXPECT_EQ(events[size_t(i)].data["index"], 1);
  EXPECT_EQ(events[10].data["delta"],
            json({{"stop_reason", "stop_sequence"}, {"stop_sequence", "END"}}));
  EXPECT_EQ(events[10].data["usage"], json({{"input_tokens", 12},
                                            {"output_tokens", 7},
                                            {"cache_creation_input_tokens", 0},
                                            {"cache_read_input_tokens", 8}}));
}

json tool_delta(int index, json function, std::string id = "") {
  json call = {{"index", index}, {"function", std::move(function)}};
  if (!id.empty()) {
    call["id"] = id;
    call["type"] = "function";
  }
  return json{{"tool_calls", json::array({std::move(call)})}};
}

TEST(AnthropicStream, ToolCallsSplitOverChunks) {
  const auto events = run_stream(
      {chunk({{"role", "assistant"}, {"content", ""}}), chunk({{"content", "Checking."}}),
       chunk(tool_delta(0, {{"name", "get_weather"}, {"arguments", ""}}, "call_a")),
       chunk(tool_delta(0, {{"arguments", "{\"city\": "}})),
       chunk(tool_delta(0, {{"arguments", "\"Paris\"}"}})),
       chunk(tool_delta(1, {{"name", "get_time"}, {"arguments", "{}"}}, "call_b")),
       chunk(json::object(), "tool_calls"), usage_chunk(5, 9, 0)});
  EXPECT_EQ(names(events),
            (std::vector<std::string>{
                "message_start", "ping", "content_block_start", "content_block_delta",
                "content_block_stop", "content_block_start", "content_block_delta",
                "content_block_delta", "content_block_stop", "content_block_start",
                "content_block_delta", "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[2].data["index"], 0);
  EXPECT_EQ(events[5].data["index"], 1);
  EXPECT_EQ(events[5].data["content_block"], json({{"type", "tool_use"},
                                                   {"id", "toolu_a"},
                                                   {"name", "get_weather"},
                                                   {"input", json::object()}}));
  std::string partial;
  for (int i : {6, 7}) {
    EXPECT_EQ(events[size_t(i)].data["index"], 1);
    EXPECT_EQ(events[size_t(i)].data["delta"]["type"], "input_json_delta");
    partial += events[size_t(i)].data["delta"]["partial_json"].get<std::string>();
  }
  EXPECT_EQ(json::parse(partial), json({{"city", "Paris"}}));
  EXPECT_EQ(events[8].data["index"], 1);
  EXPECT_EQ(events[9].data["index"], 2);
  EXPECT_EQ(events[9].data["content_block"]["name"], "get_time");
  EXPECT_EQ(events[10].data["delta"]["partial_json"], "{}");
  EXPECT_EQ(events[11].data["index"], 2);
  EXPECT_EQ(events[12].data["delta"]["stop_reason"], "tool_use");
}

TEST(AnthropicStream, MaxTokensAndAbort) {
  auto events = run_stream(
      {chunk({{"content", "cut"}}), chunk(json::object(), "length"), usage_chunk(3, 1, 0)});
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "max_tokens");
  // Aborted by the server (--request-timeout): an error event ends the stream.
  events = run_stream(
      {chunk({{"content", "cut"}}), chunk(json::object(), "abort"), usage_chunk(3, 1, 0)});
  EXPECT_EQ(events.back().name, "error");
  EXPECT_EQ(events.back().data["error"]["type"], "api_error");
  EXPECT_EQ(events[events.size() - 2].name, "content_block_stop");
}

TEST(AnthropicIds, Prefixes) {
  EXPECT_EQ(anthropic_message_id("chatcmpl-0123"), "msg_0123");
  EXPECT_EQ(anthropic_tool_use_id("call_9"), "toolu_9");
  EXPECT_EQ(anthropic_tool_use_id("other"), "toolu_other");
}

}  // namespace
}  // namespace vela::server
