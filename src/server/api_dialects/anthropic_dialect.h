#pragma once
// Anthropic's Messages API (POST /v1/messages) served by translation to chat completions:
// system / messages with content blocks (text, tool_use, tool_result, thinking), client tools,
// tool_choice, stop_sequences, the thinking config; the answer as a message with content blocks
// and stop_reason, or as Anthropic's event stream (message_start, content_block_start / delta /
// stop per block, message_delta, message_stop); errors as {"type": "error", "error": {...}}.
// POST /v1/messages/count_tokens reads the same request and answers {"input_tokens": N}.
//
// The request translation is in anthropic_request.cpp, the answer's in anthropic_dialect.cpp.
// Thread-safety: as ApiDialect (one instance per request, never used concurrently); the free
// functions are pure.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_dialects/api_dialect.h"

namespace vela::server {

enum class AnthropicEndpoint { kMessages, kCountTokens };

// A Messages request body as a chat-completions request. kCountTokens does not require
// max_tokens. A stream asks for the usage chunk.
std::optional<ApiError> anthropic_chat_request(std::string_view body, AnthropicEndpoint endpoint,
                                               nlohmann::json& chat);

// The Anthropic error body {"type": "error", "error": {"type", "message"}} for an HTTP status.
nlohmann::json anthropic_error(int status, std::string_view message);

// Anthropic ids from the chat layer's: "chatcmpl-X" -> "msg_X", "call_X" -> "toolu_X".
std::string anthropic_message_id(std::string_view chat_id);
std::string anthropic_tool_use_id(std::string_view call_id);

class AnthropicDialect : public ApiDialect {
 public:
  std::optional<ApiError> to_chat_request(std::string_view body, nlohmann::json& chat) override;
  nlohmann::json from_chat_response(const nlohmann::json& chat_response) override;
  nlohmann::json error_json(int status, const nlohmann::json& openai_error) override;
  void set_prompt_tokens(int64_t prompt_tokens) override;
  std::string stream_chunk(const nlohmann::json& chat_chunk) override;
  std::string stream_end() override;

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  // message_start (and a ping), once, from the first chunk's id and model.
  void start_message(const nlohmann::json& chat_chunk, std::string& out);
  // Closes the open block, if any (a thinking block gets its signature_delta first).
  void close_block(std::string& out);
  // Opens a block of `kind` at the next index unless one of that kind is open.
  void open_block(Block kind, const nlohmann::json& content_block, std::string& out);
  void block_delta(const nlohmann::json& delta, std::string& out);
  void tool_call_delta(const nlohmann::json& call, std::string& out);

  bool started_ = false;
  bool ended_ = false;
  int64_t prompt_tokens_ = 0;  // set_prompt_tokens(): message_start's input_tokens
  Block open_ = Block::kNone;
  int open_index_ = -1;  // the open block's index
  int next_index_ = 0;
  std::map<int, int> tool_blocks_;  // chat tool_calls[].index -> content block index
  nlohmann::json finish_reason_ = nullptr;
  nlohmann::json stop_sequence_ = nullptr;
  nlohmann::json usage_ = nullptr;  // the chat usage chunk's "usage"
};

}  // namespace vela::server
