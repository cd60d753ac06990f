// The Responses API dialect on its own: request bodies become chat requests that the chat
// parser accepts (or a 400 naming the Responses parameter), whole chat answers become response
// objects, and scripted chat chunk sequences (shaped by the same functions the chat handler
// uses) become the Responses event stream, in order, numbered, ending in the whole response.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../named_events.h"
#include "server/api_dialects/api_dialect.h"
#include "server/api_dialects/responses_dialect.h"
#include "server/generation_request.h"
#include "server/openai_response.h"

namespace vela::server {
namespace {

using json = nlohmann::json;

json translate_ok(const json& body) {
  ResponsesDialect d;
  json chat;
  auto error = d.to_chat_request(body.dump(), chat);
  EXPECT_FALSE(error.has_value()) << body << " -> " << (error ? error->message : "");
  // Whatever the translation writes, the chat parser takes.
  GenerationRequest r;
  auto chat_error =
      parse_generation_request(chat.dump(), Endpoint::kChatCompletions, RequestLimits{}, r);
  EXPECT_FALSE(chat_error.has_value()) << chat << " -> " << (chat_error ? chat_error->message : "");
  return chat;
}

ApiError translate_error(const json& body) {
  ResponsesDialect d;
  json chat;
  auto error = d.to_chat_request(body.dump(), chat);
  EXPECT_TRUE(error.has_value()) << body;
  return error.value_or(ApiError{});
}

TEST(ResponsesRequest, StringInputAndScalars) {
  const json chat = translate_ok({{"model", "m"},
                                  {"input", "Hello"},
                                  {"max_output_tokens", 12},
                                  {"temperature", 0.5},
                                  {"top_p", 0.9},
                                  {"user", "u1"},
                                  {"store", true},
                                  {"metadata", {{"k", "v"}}},
                                  {"include", json::array()},
                                  {"parallel_tool_calls", false},
                                  {"reasoning", {{"effort", "low"}, {"summary", "auto"}}},
                                  {"vela_test_script", {{"pieces", json::array({"a"})}}}});
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"user","content":"Hello"}])"));
  EXPECT_EQ(chat["max_tokens"], 12);
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_p"], 0.9);
  EXPECT_EQ(chat["user"], "u1");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["reasoning_effort"], "low");
  EXPECT_EQ(chat["vela_test_script"]["pieces"][0], "a");
  EXPECT_FALSE(chat.contains("stream_options"));
  EXPECT_FALSE(chat.contains("metadata"));  // echoed, not sent on

  // A stream asks the chat handler for its usage chunk, which response.completed needs.
  const json streamed = translate_ok({{"input", "x"}, {"stream", true}});
  EXPECT_EQ(streamed["stream"], true);
  EXPECT_EQ(streamed["stream_options"]["include_usage"], true);
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  const json chat = translate_ok(json::parse(R"({"input": [
      {"role": "developer", "content": "Be brief."},
      {"type": "message", "role": "user",
       "content": [{"type": "input_text", "text": "Weather in"}, {"type": "input_text", "text": "Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Need the tool."}]},
      {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather",
       "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
      {"type": "function_call", "call_id": "call_b", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
      {"type": "function_call_output", "call_id": "call_b",
       "output": [{"type": "input_text", "text": "noon"}]},
      {"role": "user", "content": "Thanks"}
  ]})"));
  const json want = json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in\nParis?"},
      {"role": "assistant", "content": "Checking.", "reasoning_content": "Need the tool.",
       "tool_calls": [
         {"id": "call_a", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
         {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "sunny"},
      {"role": "tool", "tool_call_id": "call_b", "name": "get_time", "content": "noon"},
      {"role": "user", "content": "Thanks"}
  ])");
  EXPECT_EQ(chat["messages"], want) << chat["messages"].dump(1);

  // A call with no message before it is an assistant message of its own; a reasoning item not
  // followed by an assistant turn is dropped.
  const json calls = translate_ok(json::parse(R"({"input": [
      {"role": "user", "content": "Hi"},
      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "T"}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "1"},
      {"type": "reasoning", "summary": []},
      {"role": "user", "content": "And?"}]})"));
  ASSERT_EQ(calls["messages"].size(), 4u) << calls;
  EXPECT_EQ(calls["messages"][1]["reasoning_content"], "T");
  EXPECT_TRUE(calls["messages"][1]["content"].is_null());
  EXPECT_EQ(calls["messages"][1]["tool_calls"].size(), 1u);
  EXPECT_FALSE(calls["messages"][3].contains("reasoning_content"));
}

TEST(ResponsesRequest, InstructionsLeadAndJoinASystemMessage) {
  const json chat = translate_ok({{"instructions", "Answer in French."}, {"input", "Hi"}});
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"system","content":"Answer in French."},
                                             {"role":"user","content":"Hi"}])"));
  const json joined =
      translate_ok({{"instructions", "A."},
                    {"input", json::array({json{{"role", "system"}, {"content", "B."}},
                                           json{{"role", "user"}, {"content", "Hi"}}})}});
  ASSERT_EQ(joined["messages"].size(), 2u);
  EXPECT_EQ(joined["messages"][0]["content"], "A.\n\nB.");
}

TEST(ResponsesRequest, TextFormatBecomesResponseFormat) {
  const json schema = {{"type", "object"}, {"properties", {{"ok", {{"type", "boolean"}}}}}};
  const json chat = translate_ok(
      {{"input", "x"},
       {"text",
        {{"format",
          {{"type", "json_schema"}, {"name", "r"}, {"schema", schema}, {"strict", true}}}}}});
  // The schema goes on as text in its written key order (a parsed object's keys are sorted).
  EXPECT_EQ(chat["response_format"],
            (json{{"type", "json_schema"},
                  {"json_schema", {{"name", "r"}, {"schema", schema.dump()}, {"strict", true}}}}));
  ResponsesDialect d;
  json ordered;
  ASSERT_FALSE(d.to_chat_request(
      R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "r", "schema":
         {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {}}}}}})",
      ordered));
  const std::string text = ordered["response_format"]["json_schema"]["schema"];
  EXPECT_LT(text.find("zeta"), text.find("alpha")) << text;
  EXPECT_EQ(translate_ok({{"input", "x"},
                          {"text", {{"format", {{"type", "json_object"}}}}}})["response_format"],
            (json{{"type", "json_object"}}));
  EXPECT_FALSE(translate_ok({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}})
                   .contains("response_format"));
  const ApiError e =
      translate_error({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}});
  EXPECT_EQ(e.param, "text.format.schema");
  EXPECT_EQ(translate_error({{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}).param,
            "text.format");
}

TEST(ResponsesRequest, FlatFunctionToolsBecomeNested) {
  const json params = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  const json chat =
      translate_ok({{"input", "x"},
                    {"tools", json::array({json{{"type", "function"},
                                                {"name", "get_weather"},
                                                {"description", "Weather"},
                                                {"parameters", params},
                                                {"strict", true}}})},
                    {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}});
  EXPECT_EQ(chat["tools"], json::array({json{{"type", "function"},
                                             {"function",
                                              {{"name", "get_weather"},
                                               {"description", "Weather"},
                                               {"parameters", params},
                                               {"strict", true}}}}}));
  EXPECT_EQ(chat["tool_choice"],
            (json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}));
  EXPECT_EQ(translate_ok({{"input", "x"}, {"tool_choice", "none"}})["tool_choice"], "none");

  const ApiError builtin = translate_error(
      {{"input", "x"}, {"tools", json::array({json{{"type", "web_search_preview"}}})}});
  EXPECT_EQ(builtin.status, 400);
  EXPECT_EQ(builtin.param, "tools");
  EXPECT_NE(builtin.message.find("web_search_preview"), std::string::npos) << builtin.message;
  // The chat shape is not the Responses one.
  EXPECT_EQ(
      translate_error(
          {{"input", "x"},
           {"tools", json::array({json{{"type", "function"}, {"function", {{"name", "f"}}}}})}})
          .param,
      "tools");
  EXPECT_EQ(translate_error({{"input", "x"}, {"tool_choice", {{"type", "file_search"}}}}).param,
            "tool_choice");
}

TEST(ResponsesRequest, StatefulAndUnknownFieldsAreRefused) {
  const ApiError prev = translate_error({{"input", "x"}, {"previous_response_id", "resp_1"}});
  EXPECT_EQ(prev.status, 400);
  EXPECT_EQ(prev.param, "previous_response_id");
  EXPECT_NE(prev.message.find("does not keep responses"), std::string::npos) << prev.message;
  EXPECT_NE(prev.message.find("'input'"), std::string::npos) << prev.message;
  // null is the same as absent.
  translate_ok({{"input", "x"}, {"previous_response_id", nullptr}});

  const ApiError unknown = translate_error({{"input", "x"}, {"messages", json::array()}});
  EXPECT_EQ(unknown.param, "messages");
  EXPECT_NE(unknown.message.find("'messages'"), std::string::npos);
  EXPECT_EQ(translate_error({{"input", "x"}, {"background", true}}).param, "background");
  EXPECT_EQ(translate_error({{"input", "x"}, {"include", {"file_search_call.results"}}}).param,
            "include");
  translate_ok({{"input", "x"}, {"include", {"reasoning.encrypted_content"}}});
}

TEST(ResponsesRequest, BadInputNamesTheParameter) {
  const ApiError role =
      translate_error({{"input", json::array({json{{"role", "tool"}, {"content", "x"}}})}});
  EXPECT_EQ(role.param, "input");
  EXPECT_NE(role.message.find("input[0].role 'tool'"), std::string::npos) << role.message;
  EXPECT_EQ(translate_error(json::object()).param, "input");
  EXPECT_EQ(translate_error({{"input", 5}}).param, "input");
  EXPECT_EQ(translate_error({{"input", json::array()}}).param, "input");
  const ApiError image = translate_error(
      {{"input", json::array({json{{"role", "user"},
                                   {"content", json::array({json{{"type", "input_image"},
                                                                 {"image_url", "u"}}})}}})}});
  EXPECT_NE(image.message.find("input_image"), std::string::npos) << image.message;
  const ApiError item =
      translate_error({{"input", json::array({json{{"type", "web_search_call"}, {"id", "ws"}}})}});
  EXPECT_NE(item.message.find("web_search_call"), std::string::npos);
  EXPECT_EQ(
      translate_error(
          {{"input",
            json::array({json{{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}})}})
          .param,
      "input");
  EXPECT_EQ(translate_error({{"input", "x"}, {"temperature", "hot"}}).param, "temperature");
  EXPECT_EQ(translate_error({{"input", "x"}, {"max_output_tokens", 0}}).param, "max_output_tokens");
  EXPECT_EQ(translate_error({{"input", "x"}, {"reasoning", {{"effort", "extreme"}}}}).param,
            "reasoning.effort");
  EXPECT_EQ(translate_error({{"input", "x"}, {"stream", "yes"}}).param, "stream");
  EXPECT_EQ(translate_error({{"input", "x"}, {"metadata", {{"k", 1}}}}).param, "metadata");
  ResponsesDialect d;
  json chat;
  EXPECT_TRUE(d.to_chat_request("{not json", chat).has_value());
  EXPECT_TRUE(d.to_chat_request("[1]", chat).has_value());
}

TEST(ResponsesRequest, ChatErrorsAreRenamed) {
  ResponsesDialect d;
  const json e = d.error_json(
      400, json::parse(error_body(invalid_request(
               "This model's maximum context length is 64 tokens. However, you requested 90 "
               "tokens (10 in the prompt, 80 for the completion). Please reduce the prompt or "
               "max_tokens.",
               "max_tokens", "context_length_exceeded"))));
  EXPECT_EQ(e["error"]["param"], "max_output_tokens");
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  const std::string m = e["error"]["message"];
  EXPECT_EQ(m.find("max_tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("max_output_tokens."), std::string::npos) << m;
  const json f = d.error_json(
      400, json::parse(error_body(invalid_request(
               "'response_format.json_schema.schema' must be an object", "response_format"))));
  EXPECT_EQ(f["error"]["param"], "text.format");
  EXPECT_EQ(f["error"]["message"], "'text.format.schema' must be an object");
  // Through the path's error body too (what the session answers before the handler runs).
  const json g =
      json::parse(error_body_for_path("/v1/responses", invalid_request("m", "messages")));
  EXPECT_EQ(g["error"]["param"], "input");
}

// Chat-side shapes, made by the functions the chat handler uses.
const ResponseMeta kMeta{Endpoint::kChatCompletions, "chatcmpl-00ab", 1700000000, "m"};

json whole_chat(json message, const char* finish) {
  json choice = response_choice(Endpoint::kChatCompletions, 0, "", nullptr, finish);
  choice["message"] = std::move(message);
  return full_response(kMeta, json::array({std::move(choice)}), usage_json(11, 7, 3));
}

ResponsesDialect dialect_for(const json& body) {
  ResponsesDialect d;
  json chat;
  EXPECT_FALSE(d.to_chat_request(body.dump(), chat).has_value());
  return d;
}

TEST(ResponsesResponse, WholeAnswerBecomesOutputItems) {
  ResponsesDialect d = dialect_for({{"input", "x"},
                                    {"instructions", "I"},
                                    {"max_output_tokens", 50},
                                    {"metadata", {{"a", "b"}}}});
  const json r = d.from_chat_response(whole_chat(
      json::parse(R"({"role": "assistant", "content": "Calling.", "reasoning_content": "Hmm.",
                      "tool_calls": [{"id": "call_1", "type": "function",
                                      "function": {"name": "f", "arguments": "{\"a\":1}"}}]})"),
      "tool_calls"));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"], "resp_00ab");
  EXPECT_EQ(r["created_at"], 1700000000);
  EXPECT_EQ(r["model"], "m");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_FALSE(r.contains("output_text"));  // the SDK computes it
  EXPECT_EQ(r["instructions"], "I");
  EXPECT_EQ(r["max_output_tokens"], 50);
  EXPECT_EQ(r["metadata"], (json{{"a", "b"}}));
  EXPECT_EQ(r["tool_choice"], "auto");
  EXPECT_EQ(r["parallel_tool_calls"], true);
  EXPECT_EQ(r["text"]["format"]["type"], "text");
  ASSERT_EQ(r["output"].size(), 3u) << r.dump(1);
  const json& rs = r["output"][0];
  EXPECT_EQ(rs["type"], "reasoning");
  EXPECT_EQ(rs["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(rs["summary"], json::array());
  EXPECT_EQ(rs["content"][0], (json{{"type", "reasoning_text"}, {"text", "Hmm."}}));
  const json& msg = r["output"][1];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["content"][0],
            (json{{"type", "output_text"}, {"text", "Calling."}, {"annotations", json::array()}}));
  const json& fc = r["output"][2];
  EXPECT_EQ(fc["type"], "function_call");
  EXPECT_EQ(fc["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(fc["call_id"], "call_1");
  EXPECT_EQ(fc["name"], "f");
  EXPECT_EQ(fc["arguments"], "{\"a\":1}");
  EXPECT_EQ(fc["status"], "completed");
  EXPECT_EQ(r["usage"], json::parse(R"({"input_tokens": 11, "input_tokens_details":
      {"cached_tokens": 3}, "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
      "total_tokens": 18})"));
  // Item ids are distinct.
  EXPECT_NE(rs["id"], msg["id"]);
  EXPECT_NE(msg["id"], fc["id"]);

  ResponsesDialect cut = dialect_for({{"input", "x"}});
  const json c = cut.from_chat_response(
      whole_chat(json{{"role", "assistant"}, {"content", "Once upon"}}, "length"));
  EXPECT_EQ(c["status"], "incomplete");
  EXPECT_EQ(c["incomplete_details"], (json{{"reason", "max_output_tokens"}}));
  ASSERT_EQ(c["output"].size(), 1u);
  EXPECT_EQ(c["output"][0]["status"], "incomplete");
}

using Event = test::NamedEvent;
using test::parse_named_events;

// Runs the chunks through a streaming dialect; checks numbering, and that the final response
// equals the whole answer's translation (`whole` the chat message the stream adds up to).
std::vector<Event> run_stream(const std::vector<json>& chunks, const json& whole_message,
                              const char* finish) {
  ResponsesDialect d = dialect_for({{"input", "x"}, {"stream", true}});
  std::string text;
  for (const json& c : chunks) text += d.stream_chunk(c);
  text += d.stream_chunk(usage_chunk(kMeta, usage_json(11, 7, 3)));
  text += d.stream_end();
  std::vector<Event> events = parse_named_events(text);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].data["sequence_number"], i);
  ResponsesDialect w = dialect_for({{"input", "x"}, {"stream", true}});
  const json want = w.from_chat_response(whole_chat(whole_message, finish));
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_EQ(events.back().data["response"], want);
  }
  return events;
}

std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.name);
  return out;
}

json text_chunk(const std::string& text, const char* finish = nullptr) {
  return stream_chunk(kMeta, 0, text, false, nullptr, finish, true);
}

json delta_chunk(json delta) {
  json c = stream_chunk(kMeta, 0, "", false, nullptr, nullptr, true);
  c["choices"][0]["delta"] = std::move(delta);
  return c;
}

const json kRoleChunk = stream_chunk(kMeta, 0, "", true, nullptr, nullptr, true);

TEST(ResponsesStream, Text) {
  const auto events = run_stream({kRoleChunk, text_chunk("Hel"), text_chunk("lo "),
                                  text_chunk("there"), text_chunk("", "stop")},
                                 json{{"role", "assistant"}, {"content", "Hello there"}}, "stop");
  const std::vector<std::string> want = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done",
      "response.completed"};
  ASSERT_EQ(names(events), want);
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], json::array());
  EXPECT_EQ(events[0].data["response"]["id"], "resp_00ab");
  const std::string item = events[2].data["item"]["id"];
  EXPECT_EQ(events[2].data["item"]["status"], "in_progress");
  EXPECT_EQ(events[2].data["output_index"], 0);
  std::string text;
  for (size_t i = 4; i <= 6; ++i) {
    EXPECT_EQ(events[i].data["item_id"], item);
    EXPECT_EQ(events[i].data["output_index"], 0);
    EXPECT_EQ(events[i].data["content_index"], 0);
    text += events[i].data["delta"].get<std::string>();
  }
  // The trailing space of "lo " waits for the next text.
  EXPECT_EQ(events[5].data["delta"], "lo");
  EXPECT_EQ(text, "Hello there");
  EXPECT_EQ(events[7].data["text"], "Hello there");
  EXPECT_EQ(events[8].data["part"]["text"], "Hello there");
  EXPECT_EQ(events[9].data["item"]["status"], "completed");
  EXPECT_EQ(events.back().data["response"]["usage"]["output_tokens"], 7);
}

TEST(ResponsesStream, ReasoningThenText) {
  const auto events = run_stream(
      {kRoleChunk, delta_chunk({{"reasoning_content", "Let me"}}),
       delta_chunk({{"reasoning_content", " think."}}), text_chunk("4"), text_chunk("", "stop")},
      json{{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "Let me think."}},
      "stop");
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(names(events), want);
  EXPECT_EQ(events[2].data["item"]["type"], "reasoning");
  EXPECT_EQ(events[3].data["part"]["type"], "reasoning_text");
  EXPECT_EQ(events[4].data["delta"], "Let me");
  EXPECT_EQ(events[6].data["text"], "Let me think.");
  EXPECT_EQ(events[8].data["item"]["content"][0]["text"], "Let me think.");
  EXPECT_EQ(events[9].data["output_index"], 1);
  EXPECT_EQ(events[9].data["item"]["type"], "message");
  EXPECT_EQ(events[11].data["output_index"], 1);
}

TEST(ResponsesStream, ToolCallSplitOverChunks) {
  // As the handler streams a call: its first delta carries id and name, then the arguments in
  // pieces; the separator before the call is whitespace content.
  const json first = {{"index", 0},
                      {"id", "call_9"},
                      {"type", "function"},
                      {"function", {{"name", "get_weather"}, {"arguments", ""}}}};
  auto args = [](const char* piece) {
    return delta_chunk(
        {{"tool_calls", json::array({json{{"index", 0}, {"function", {{"arguments", piece}}}}})}});
  };
  const auto events =
      run_stream({kRoleChunk, text_chunk("Checking."), text_chunk("\n\n"),
                  delta_chunk({{"tool_calls", json::array({first})}}), args("{\"city\": "),
                  args("\"Paris\"}"), text_chunk("", "tool_calls")},
                 json::parse(R"({"role": "assistant", "content": "Checking.", "tool_calls": [
          {"id": "call_9", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})"),
                 "tool_calls");
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(names(events), want);
  EXPECT_EQ(events[5].data["text"], "Checking.");
  const json& added = events[8].data;
  EXPECT_EQ(added["output_index"], 1);
  EXPECT_EQ(added["item"]["type"], "function_call");
  EXPECT_EQ(added["item"]["call_id"], "call_9");
  EXPECT_EQ(added["item"]["name"], "get_weather");
  EXPECT_EQ(added["item"]["arguments"], "");
  EXPECT_EQ(events[9].data["item_id"], added["item"]["id"]);
  EXPECT_EQ(events[9].data["delta"], "{\"city\": ");
  EXPECT_EQ(events[11].data["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(events[12].data["item"]["status"], "completed");
}

TEST(ResponsesStream, CutShortIsIncomplete) {
  const auto events = run_stream({kRoleChunk, text_chunk("Once"), text_chunk(" upon", "length")},
                                 json{{"role", "assistant"}, {"content", "Once upon"}}, "length");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "response.incomplete");
  EXPECT_EQ(events.back().data["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(events[events.size() - 2].data["item"]["status"], "incomplete");
}

}  // namespace
}  // namespace vela::server
