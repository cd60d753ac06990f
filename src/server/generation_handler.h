#pragma once
// One completions / chat-completions HTTP request from parsed body to last byte: checks the
// model name, renders chat messages, tokenizes, submits n engine requests per prompt, and turns
// the engine's events into a JSON response or a server-sent-event stream.
//
// Engine callbacks run on the engine thread; they copy what they need into a small queue and
// post one drain to the io_context when the queue goes from empty to non-empty, so the engine
// thread never waits on the network and a burst of tokens costs one wake-up.
//
// Parsing, chat-template rendering and tokenization run on the request workers (when the
// context has them), then the handler continues on the io_context thread.
//
// Thread-safety: start(), client_gone() and every ResponseSink call run on the io_context
// thread. prepare() runs on a request worker while the io_context thread touches nothing it
// writes (the request and the prompts; the hand-back is a post). on_engine_event() runs on the
// engine thread and touches only the event queue (under
// its mutex), the per-choice token clocks (engine thread only) and the metrics (lock-free).
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "server/api_dialects/api_dialect.h"
#include "server/openai_response.h"
#include "server/reasoning/reasoning_parser.h"
#include "server/response_sink.h"
#include "server/server_context.h"
#include "server/tool_calls.h"

namespace vela::server {

// For the access log, once the exchange is over.
struct HandlerSummary {
  std::string id;
  bool stream = false;
  bool completed = false;  // every choice finished (token counts are known)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<double> ttft_ms;
  bool client_gone = false;
};

class GenerationHandler : public std::enable_shared_from_this<GenerationHandler> {
 public:
  GenerationHandler(ServerContext& ctx, std::weak_ptr<ResponseSink> sink,
                    Clock::time_point received);
  ~GenerationHandler();

  // Parses, tokenizes (on a request worker) and submits; answers errors through the sink.
  // With a dialect (chat only), the body is that API's request, translated to a chat request
  // on the worker first; the sink translates what the handler writes back.
  void start(Endpoint endpoint, std::string body, std::shared_ptr<ApiDialect> dialect = nullptr);
  // The client disconnected or fell too far behind: cancel the engine requests (their KV
  // blocks are freed at the next engine step) and write nothing more.
  void client_gone();

  const HandlerSummary& summary() const { return summary_; }

 private:
  // One engine event, copied off the engine thread.
  struct Event {
    int32_t choice = 0;
    std::string text;
    std::optional<TokenLogprobs> logprobs;
    bool finished = false;
    FinishReason reason = FinishReason::kLength;
    std::string stop_reason;  // the stop string that matched, if any
    int32_t n_prompt = 0;
    int32_t n_output = 0;
    int32_t cached = 0;
    Clock::time_point first_token{};
    std::optional<CompletionOutput> output;  // non-streaming final event
  };
  struct Choice {
    int32_t prompt_index = 0;
    uint64_t engine_id = 0;
    bool submitted = false;
    bool finished = false;
    FinishReason reason = FinishReason::kLength;
    int32_t n_prompt = 0;
    int32_t n_output = 0;
    int32_t cached = 0;
    int64_t text_offset = 0;  // completions logprobs text_offset, streaming
    CompletionOutput output;  // non-streaming result
    // Streaming through the reasoning or tool parser: each holds text back, so the logprobs of
    // tokens whose text is held go with the next chunk written.
    std::vector<TokenLogprobs> pending_logprobs;
    std::optional<ReasoningStream> reasoning_stream;
    std::optional<ToolCallStreamParser> tool_stream;
  };

  void fail(const ApiError& error, int retry_after_seconds = 0);
  // Request worker: parse the body, render and tokenize the prompts.
  std::optional<ApiError> prepare(std::string_view body,
                                  std::vector<std::vector<int32_t>>& prompts);
  void on_prepared(std::optional<ApiError> error, std::vector<std::vector<int32_t>> prompts);
  void start_deadline();
  void on_deadline();
  ApiError timeout_error() const;
  std::optional<ApiError> prepare_prompts(std::vector<std::vector<int32_t>>& prompts);
  void submit_all(std::vector<std::vector<int32_t>>& prompts);
  void on_engine_event(int32_t choice, const RequestEvent& e);  // engine thread
  void drain();
  void handle_stream_event(const Event& e);
  void finish_response();
  // Indices into choices_ of the choices the response shows, in order: all of them, or per
  // prompt the n of best_of candidates with the highest cumulative logprob.
  std::vector<size_t> returned_choices() const;
  std::shared_ptr<ResponseSink> live_sink() const;
  // Tool calling (chat with tools and tool_choice other than none): outputs are parsed.
  bool parses_tool_calls() const;
  std::optional<ApiError> prepare_tools();
  bool stream_tool_deltas(int32_t choice, std::vector<ToolCallStreamParser::Delta> deltas);
  // Reasoning (chat, with a reasoning parser): the output's thinking goes to reasoning_content.
  bool parses_reasoning() const;
  // The reasoning budget and where the output begins (read off the rendered prompt), and the
  // test hook's scripted tokens.
  std::optional<ApiError> prepare_output_control(const std::string& prompt_text);
  // Writes one chat chunk whose delta is `delta`; false when the client is gone.
  bool write_delta(int32_t choice, nlohmann::json delta);
  // The choice's streamed text through its parsers.
  void stream_parsed(Choice& c, const Event& e, const char* finish);

  ServerContext& ctx_;
  std::weak_ptr<ResponseSink> sink_;
  std::shared_ptr<ApiDialect> dialect_;  // null: the body is an OpenAI completions/chat request
  std::shared_ptr<const LoadedModel> model_;  // pinned for the request's lifetime
  Clock::time_point received_;
  GenerationRequest request_;
  ResponseMeta meta_;
  HandlerSummary summary_;
  std::vector<Choice> choices_;         // best_of per prompt, prompt-major
  std::vector<std::string> echo_text_;  // per prompt, when echo was asked
  int32_t n_finished_ = 0;
  bool gone_ = false;
  bool responded_ = false;
  bool timed_out_ = false;  // --request-timeout passed: the engine requests were aborted
  boost::asio::steady_timer deadline_;
  std::optional<Clock::time_point> first_token_;
  ToolCallFormat tool_format_ = ToolCallFormat::kHermes;
  reasoning::Phase reasoning_begin_ = reasoning::Phase::kBefore;  // from the rendered prompt
  // The choice's pending logprobs as a chunk's "logprobs" (null when none), emptying them.
  nlohmann::json take_pending_logprobs(Choice& c);

  // Engine thread only: when each choice's previous token came (inter-token latency).
  std::vector<Clock::time_point> last_token_time_;

  std::mutex mutex_;            // guards pending_ and drain_posted_
  std::vector<Event> pending_;  // engine -> io
  bool drain_posted_ = false;
  std::vector<Event> draining_;  // io thread: the batch being handled (capacity reused)
};

}  // namespace vela::server
