#include "server/generation_handler.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "model/model.h"
#include "server/request_workers.h"
#include "server/structured_output_request.h"
#include "util/trace.h"

namespace vela::server {

using json = nlohmann::json;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A choice's "stop_reason" (vLLM's field): the stop string that ended it, or null.
json stop_reason_json(const std::string& matched) {
  return matched.empty() ? json(nullptr) : json(matched);
}

Rejection rejection_for(int status) {
  if (status == 429) return Rejection::kQueueFull;
  if (status == 401) return Rejection::kUnauthorized;
  if (status == 413) return Rejection::kTooLarge;
  if (status >= 500) return Rejection::kUnavailable;
  return Rejection::kInvalid;
}

}  // namespace

GenerationHandler::GenerationHandler(ServerContext& ctx, std::weak_ptr<ResponseSink> sink,
                                     Clock::time_point received)
    : ctx_(ctx), sink_(std::move(sink)), received_(received), deadline_(ctx.io) {}

GenerationHandler::~GenerationHandler() = default;

std::shared_ptr<ResponseSink> GenerationHandler::live_sink() const {
  return gone_ ? nullptr : sink_.lock();
}

void GenerationHandler::fail(const ApiError& error, int retry_after_seconds) {
  responded_ = true;
  deadline_.cancel();
  ctx_.metrics.count_rejection(rejection_for(error.status));
  if (auto sink = live_sink())
    sink->send_json(error.status, error_body(error), retry_after_seconds);
}

void GenerationHandler::start(Endpoint endpoint, std::string body,
                              std::shared_ptr<ApiDialect> dialect) {
  dialect_ = std::move(dialect);
  model_ = ctx_.model;
  if (!model_) {
    ApiError e{503, "the model is still loading; retry shortly", "service_unavailable", "", ""};
    return fail(e, 1);
  }
  if (ctx_.draining) {
    ApiError e{503, "the server is shutting down", "service_unavailable", "", ""};
    return fail(e);
  }
  meta_.endpoint = endpoint;
  meta_.id = ctx_.make_id(endpoint == Endpoint::kCompletions ? "cmpl" : "chatcmpl");
  meta_.created = int64_t(std::time(nullptr));
  meta_.model = ctx_.options.served_model_name;
  summary_.id = meta_.id;
  start_deadline();
  if (!ctx_.workers) {
    std::vector<std::vector<int32_t>> prompts;
    auto error = prepare(body, prompts);
    return on_prepared(std::move(error), std::move(prompts));
  }
  const size_t bytes = body.size();
  // The worker hands its reference to the IO thread, where the handler's last one drops.
  ctx_.workers->post(bytes, [self = shared_from_this(), body = std::move(body)]() mutable {
    std::vector<std::vector<int32_t>> prompts;
    auto error = self->prepare(body, prompts);
    auto& io = self->ctx_.io;
    boost::asio::post(io, [self = std::move(self), error = std::move(error),
                           prompts = std::move(prompts)]() mutable {
      self->on_prepared(std::move(error), std::move(prompts));
    });
  });
}

std::optional<ApiError> GenerationHandler::prepare(std::string_view body,
                                                   std::vector<std::vector<int32_t>>& prompts) {
  trace::Span span("prepare_request", "http");  // parse, template, tokenize
  span.arg("body_bytes", int64_t(body.size()));
  RequestLimits limits = ctx_.options.limits;
  limits.default_chat_max_tokens = model_->max_model_len;
  std::string translated;
  if (dialect_) {
    json chat;
    if (auto error = dialect_->to_chat_request(body, chat)) return error;
    translated = dump_json(chat);
    body = translated;
  }
  if (auto error = parse_generation_request(body, meta_.endpoint, limits, request_)) return error;
  // Another model's name: on_prepared() says so; no need to tokenize.
  if (!request_.model.empty() && request_.model != ctx_.options.served_model_name)
    return std::nullopt;
  // Harmony answers in the final channel's message: the constraint is written around it.
  if (parses_reasoning() && model_->reasoning == ReasoningFormat::kGptOss &&
      request_.params.structured_outputs.active()) {
    auto whole = harmony_final_answer(request_.params.structured_outputs);
    if (!whole) return invalid_request(whole.message(), "response_format");
    request_.params.structured_outputs = std::move(*whole);
  }
  if (auto error = prepare_tools()) return error;
  return prepare_prompts(prompts);
}

void GenerationHandler::on_prepared(std::optional<ApiError> error,
                                    std::vector<std::vector<int32_t>> prompts) {
  if (gone_ || responded_) return;  // the client left, or the deadline answered already
  if (error) return fail(*error);
  summary_.stream = request_.stream;
  if (!request_.model.empty() && request_.model != ctx_.options.served_model_name) {
    ApiError e{404,
               "The model '" + request_.model + "' does not exist; this server serves '" +
                   ctx_.options.served_model_name + "'",
               "invalid_request_error", "model", "model_not_found"};
    return fail(e);
  }
  submit_all(prompts);
}

void GenerationHandler::start_deadline() {
  const double limit = ctx_.options.request_timeout_seconds;
  if (limit <= 0) return;
  deadline_.expires_at(received_ + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(limit)));
  deadline_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->on_deadline();
  });
}

void GenerationHandler::on_deadline() {
  if (responded_ || gone_) return;
  timed_out_ = true;
  ctx_.metrics.count_event(ServerEvent::kRequestTimeout);
  if (choices_.empty()) {  // still being parsed and tokenized: answer now
    responded_ = true;
    if (auto sink = live_sink()) sink->send_json(504, error_body(timeout_error()));
    return;
  }
  // The aborted choices finish through the engine; finish_response() then answers 504, or ends
  // the stream with finish_reason "abort".
  for (const Choice& c : choices_)
    if (c.submitted && !c.finished) model_->engine->abort(c.engine_id);
}

ApiError GenerationHandler::timeout_error() const {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g", ctx_.options.request_timeout_seconds);
  return ApiError{504,
                  std::string("the request did not finish within the server's --request-timeout "
                              "of ") +
                      limit + " s",
                  "timeout_error", "", "request_timeout"};
}

std::optional<ApiError> GenerationHandler::prepare_prompts(
    std::vector<std::vector<int32_t>>& prompts) {
  const Tokenizer& tokenizer = model_->engine->tokenizer();
  if (request_.endpoint == Endpoint::kChatCompletions) {
    if (!model_->chat)
      return invalid_request("this model has no usable chat template (" + model_->chat_unavailable +
                                 "); start the server with --chat-template FILE, or use "
                                 "/v1/completions",
                             "messages", "chat_template_missing");
    auto text = model_->chat->render(request_.messages, /*add_generation_prompt=*/true,
                                     request_.tools.active() ? request_.tools.tools : nullptr,
                                     request_.chat_template_kwargs);
    if (!text) return invalid_request("the chat template failed: " + text.message(), "messages");
    if (auto error = prepare_output_control(*text)) return error;
    // The template writes any BOS itself (as vLLM and HF tokenizers do for chat).
    prompts.push_back(tokenizer.encode(*text, /*add_special=*/false, /*parse_special=*/true));
  } else {
    for (const PromptInput& in : request_.prompts)
      prompts.push_back(in.pretokenized ? in.tokens
                                        : tokenizer.encode(in.text, /*add_special=*/true,
                                                           /*parse_special=*/true));
  }
  const int64_t cap = model_->max_model_len;
  const int32_t n_vocab = model_->engine->model().config().n_vocab;
  for (const auto& [token, bias] : request_.params.logit_bias)
    if (token >= n_vocab)
      return invalid_request("logit_bias token id " + std::to_string(token) +
                                 " is out of range (vocabulary of " + std::to_string(n_vocab) + ")",
                             "logit_bias");
  if (request_.echo)
    for (size_t i = 0; i < prompts.size(); ++i)
      echo_text_.push_back(request_.prompts[i].pretokenized
                               ? tokenizer.decode(prompts[i], /*skip_special=*/true)
                               : request_.prompts[i].text);
  const char* param = request_.endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
  for (const std::vector<int32_t>& p : prompts) {
    if (p.empty()) return invalid_request("the prompt is empty", param);
    for (int32_t t : p)
      if (t >= n_vocab)
        return invalid_request("token id " + std::to_string(t) +
                                   " is out of range (vocabulary of " + std::to_string(n_vocab) +
                                   ")",
                               param);
    const int64_t n = int64_t(p.size());
    if (n >= cap)
      return invalid_request("This model's maximum context length is " + std::to_string(cap) +
                                 " tokens. However, your prompt has " + std::to_string(n) +
                                 " tokens. Please reduce the length of the prompt.",
                             param, "context_length_exceeded");
    if (request_.max_tokens_given && n + request_.params.max_tokens > cap)
      return invalid_request("This model's maximum context length is " + std::to_string(cap) +
                                 " tokens. However, you requested " +
                                 std::to_string(n + request_.params.max_tokens) + " tokens (" +
                                 std::to_string(n) + " in the prompt, " +
                                 std::to_string(request_.params.max_tokens) +
                                 " for the completion). Please reduce the prompt or max_tokens.",
                             "max_tokens", "context_length_exceeded");
  }
  return std::nullopt;
}

void GenerationHandler::submit_all(std::vector<std::vector<int32_t>>& prompts) {
  const int64_t prompt_tokens = prompts.empty() ? 0 : int64_t(prompts[0].size());
  const int32_t n = request_.best_of;  // candidates per prompt (n unless best_of asks more)
  choices_.resize(prompts.size() * size_t(n));
  if (request_.stream)
    for (Choice& c : choices_) {
      if (parses_reasoning()) c.reasoning_stream.emplace(model_->reasoning, reasoning_begin_);
      if (parses_tool_calls()) c.tool_stream.emplace(tool_format_, request_.tools.tools);
    }
  last_token_time_.assign(choices_.size(), Clock::time_point{});
  AsyncEngine& engine = *model_->engine;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    for (int32_t j = 0; j < n; ++j) {
      const int32_t index = int32_t(pi) * n + j;
      Choice& c = choices_[size_t(index)];
      c.prompt_index = int32_t(pi);
      SamplingParams params = request_.params;
      // Ranking best_of candidates needs each one's cumulative logprob.
      if (request_.best_of > request_.n && !params.logprobs) params.logprobs = 0;
      // n samples of one seeded request differ from each other but repeat across calls.
      if (params.seed && j > 0) params.seed = *params.seed + uint64_t(j);
      std::vector<int32_t> tokens = j + 1 < n ? prompts[pi] : std::move(prompts[pi]);
      auto id = engine.submit(std::move(tokens), params, request_.priority,
                              [self = shared_from_this(), index](const RequestEvent& e) {
                                self->on_engine_event(index, e);
                              });
      if (!id) {
        // Cancel what was already queued; its events are ignored (responded_).
        for (Choice& other : choices_)
          if (other.submitted) engine.abort(other.engine_id);
        const std::string& m = id.message();
        if (m.rfind(AsyncEngine::kQueueFull, 0) == 0)
          return fail(
              ApiError{429, "the server is busy: " + m, "rate_limit_error", "", "queue_full"}, 1);
        if (m.find("shutting down") != std::string::npos)
          return fail(ApiError{503, m, "service_unavailable", "", ""});
        return fail(invalid_request(m));
      }
      c.engine_id = *id;
      c.submitted = true;
    }
  }
  if (!request_.stream) return;
  auto sink = live_sink();
  if (!sink) return client_gone();
  if (dialect_) dialect_->set_prompt_tokens(prompt_tokens);
  sink->begin_stream();
  // echo: each choice's stream starts with its prompt's text.
  for (size_t i = 0; i < choices_.size() && !echo_text_.empty(); ++i)
    if (!sink->stream_json(stream_chunk(meta_, int32_t(i),
                                        echo_text_[size_t(choices_[i].prompt_index)], false,
                                        nullptr, nullptr, request_.include_usage)))
      return client_gone();
  // Chat streams open each choice with the assistant role (as OpenAI and vLLM do).
  if (request_.endpoint == Endpoint::kChatCompletions)
    for (int32_t i = 0; i < int32_t(choices_.size()); ++i)
      if (!sink->stream_json(stream_chunk(meta_, i, "", /*role_delta=*/true, nullptr, nullptr,
                                          request_.include_usage)))
        return client_gone();
}

void GenerationHandler::on_engine_event(int32_t choice, const RequestEvent& e) {
  // Engine thread: copy, observe metrics, hand over. Nothing here waits on I/O.
  const Clock::time_point now = Clock::now();
  if (e.token >= 0) {
    Clock::time_point& last = last_token_time_[size_t(choice)];
    if (last != Clock::time_point{}) ctx_.metrics.observe_inter_token(seconds_between(last, now));
    last = now;
  }
  Event ev;
  ev.choice = choice;
  ev.text.assign(e.text);
  if (e.logprobs) ev.logprobs = *e.logprobs;
  ev.finished = e.finished;
  if (e.finished) {
    const Request& r = *e.request;
    ev.reason = e.output->finish_reason;
    ev.stop_reason = e.output->stop_reason;
    ev.n_prompt = r.n_prompt;
    ev.n_output = r.n_output();
    ev.cached = r.cached_prompt_tokens;
    ev.first_token = r.timeline.first_token;
    if (!request_.stream) ev.output = *e.output;
    ctx_.metrics.observe_request(
        make_request_record(r.timeline, received_, r.n_prompt, r.n_output()));
  }
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(ev));
    post = !drain_posted_;
    drain_posted_ = true;
  }
  if (post) boost::asio::post(ctx_.io, [self = shared_from_this()] { self->drain(); });
}

void GenerationHandler::drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_.swap(pending_);
    drain_posted_ = false;
  }
  for (Event& e : draining_) {
    Choice& c = choices_[size_t(e.choice)];
    if (!responded_ && !gone_ && request_.stream) handle_stream_event(e);
    if (!e.finished) continue;
    c.finished = true;
    c.reason = e.reason;
    c.n_prompt = e.n_prompt;
    c.n_output = e.n_output;
    c.cached = e.cached;
    if (e.output) c.output = std::move(*e.output);
    if (e.first_token != Clock::time_point{} && (!first_token_ || e.first_token < *first_token_))
      first_token_ = e.first_token;
    ++n_finished_;
  }
  draining_.clear();
  if (n_finished_ == int32_t(choices_.size()) && !responded_) finish_response();
}

void GenerationHandler::handle_stream_event(const Event& e) {
  if (e.text.empty() && !e.logprobs && !e.finished) return;
  Choice& c = choices_[size_t(e.choice)];
  const bool parsed = c.reasoning_stream || c.tool_stream;
  json logprobs = nullptr;
  if (e.logprobs && parsed) {
    c.pending_logprobs.push_back(*e.logprobs);
  } else if (e.logprobs) {
    std::span<const TokenLogprobs> one(&*e.logprobs, 1);
    logprobs = request_.endpoint == Endpoint::kCompletions ? completion_logprobs(one, c.text_offset)
                                                           : chat_logprobs(one);
  }
  const char* finish = e.finished ? finish_reason_name(e.reason) : nullptr;
  auto sink = live_sink();
  if (!sink) return;
  if (parsed) return stream_parsed(c, e, finish);
  json chunk = stream_chunk(meta_, e.choice, e.text, false, std::move(logprobs), finish,
                            request_.include_usage);
  if (e.finished) chunk["choices"][0]["stop_reason"] = stop_reason_json(e.stop_reason);
  if (!sink->stream_json(chunk)) client_gone();
}

void GenerationHandler::stream_parsed(Choice& c, const Event& e, const char* finish) {
  std::string thinking, content;
  if (c.reasoning_stream) {
    ReasoningStream::Split split = c.reasoning_stream->push(e.text);
    if (e.finished) {
      ReasoningStream::Split rest = c.reasoning_stream->finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    thinking = std::move(split.reasoning);
    content = std::move(split.content);
  } else {
    content = e.text;
  }
  if (!thinking.empty() && !write_delta(e.choice, json{{"reasoning_content", thinking}})) return;
  if (c.tool_stream) {
    std::vector<ToolCallDelta> deltas = c.tool_stream->push(content);
    if (e.finished)
      for (ToolCallDelta& d : c.tool_stream->finish()) deltas.push_back(std::move(d));
    if (!stream_tool_deltas(e.choice, std::move(deltas))) return;
    if (c.tool_stream->saw_calls() && e.reason == FinishReason::kStop) finish = "tool_calls";
  } else if (!content.empty() && !write_delta(e.choice, json{{"content", content}})) {
    return;
  }
  if (!e.finished) return;
  auto sink = live_sink();
  if (!sink) return;
  json chunk = stream_chunk(meta_, e.choice, "", false, take_pending_logprobs(c), finish,
                            request_.include_usage);
  chunk["choices"][0]["stop_reason"] = stop_reason_json(e.stop_reason);
  if (!sink->stream_json(chunk)) client_gone();
}

bool GenerationHandler::write_delta(int32_t choice, json delta) {
  auto sink = live_sink();
  if (!sink) return false;
  json chunk =
      stream_chunk(meta_, choice, "", false, take_pending_logprobs(choices_[size_t(choice)]),
                   nullptr, request_.include_usage);
  chunk["choices"][0]["delta"] = std::move(delta);
  if (!sink->stream_json(chunk)) {
    client_gone();
    return false;
  }
  return true;
}

void GenerationHandler::finish_response() {
  responded_ = true;
  deadline_.cancel();
  int64_t prompt_tokens = 0, completion_tokens = 0, cached = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    completion_tokens += c.n_output;
    // Each prompt counts once, however many choices it has (as OpenAI's usage does).
    if (i % size_t(request_.best_of) == 0) {
      prompt_tokens += c.n_prompt;
      cached += c.cached;
    }
  }
  summary_.completed = true;
  summary_.prompt_tokens = prompt_tokens;
  summary_.completion_tokens = completion_tokens;
  if (first_token_) summary_.ttft_ms = seconds_between(received_, *first_token_) * 1e3;
  auto sink = live_sink();
  if (!sink) return;
  const json usage = usage_json(prompt_tokens, completion_tokens, cached);
  if (request_.stream) {
    if (request_.include_usage && !sink->stream_json(usage_chunk(meta_, usage)))
      return client_gone();
    if (!sink->stream_done()) return client_gone();
    sink->end_stream();
    return;
  }
  if (timed_out_) return sink->send_json(504, error_body(timeout_error()));
  json choices = json::array();
  for (const size_t i : returned_choices()) {
    const Choice& c = choices_[i];
    json logprobs = nullptr;
    if (request_.logprobs) {
      int64_t offset = 0;
      logprobs = request_.endpoint == Endpoint::kCompletions
                     ? completion_logprobs(c.output.logprobs, offset)
                     : chat_logprobs(c.output.logprobs);
    }
    const std::string text =
        echo_text_.empty() ? c.output.text : echo_text_[size_t(c.prompt_index)] + c.output.text;
    std::string content = text;
    std::optional<std::string> thinking;
    if (parses_reasoning()) {
      ReasoningStream split(model_->reasoning, reasoning_begin_);
      ReasoningStream::Split a = split.push(text), b = split.finish();
      thinking = a.reasoning + b.reasoning;
      content = a.content + b.content;
    }
    json choice = response_choice(request_.endpoint, int32_t(choices.size()), content,
                                  std::move(logprobs), finish_reason_name(c.reason));
    choice["stop_reason"] = stop_reason_json(c.output.stop_reason);
    if (thinking) {
      choice["message"]["reasoning_content"] = thinking->empty() ? json(nullptr) : json(*thinking);
      if (content.empty()) choice["message"]["content"] = nullptr;  // only thinking came
    }
    if (parses_tool_calls()) {
      ParsedToolOutput parsed = parse_tool_calls(content, tool_format_, request_.tools.tools);
      if (!request_.tools.parallel && parsed.calls.size() > 1) parsed.calls.resize(1);
      if (!parsed.calls.empty()) {
        choice["message"]["content"] = parsed.content ? json(*parsed.content) : json(nullptr);
        choice["message"]["tool_calls"] = tool_calls_json(parsed.calls);
        if (c.reason == FinishReason::kStop) choice["finish_reason"] = "tool_calls";
      }
    }
    choices.push_back(std::move(choice));
  }
  sink->send_json(200, dump_json(full_response(meta_, std::move(choices), usage)));
}

std::vector<size_t> GenerationHandler::returned_choices() const {
  const size_t per_prompt = size_t(request_.best_of);
  std::vector<size_t> out;
  for (size_t first = 0; first < choices_.size(); first += per_prompt) {
    std::vector<size_t> group(per_prompt);
    for (size_t j = 0; j < per_prompt; ++j) group[j] = first + j;
    if (request_.best_of > request_.n) {
      // The candidates were asked for their tokens' logprobs (submit_all): sum them.
      std::vector<double> score(choices_.size(), 0.0);
      for (size_t j : group)
        for (const TokenLogprobs& t : choices_[j].output.logprobs) score[j] += t.logprob;
      std::stable_sort(group.begin(), group.end(),
                       [&](size_t a, size_t b) { return score[a] > score[b]; });
      group.resize(size_t(request_.n));
    }
    out.insert(out.end(), group.begin(), group.end());
  }
  return out;
}

bool GenerationHandler::parses_tool_calls() const {
  return request_.endpoint == Endpoint::kChatCompletions && request_.tools.active() &&
         request_.tools.choice != ToolRequest::Choice::kNone;
}

std::optional<ApiError> GenerationHandler::prepare_tools() {
  if (!parses_tool_calls() || !model_->chat) return std::nullopt;
  if (!model_->tool_format)
    return invalid_request(
        "this server does not parse tool calls: " + model_->tools_unavailable +
            " (start it with --tool-call-parser NAME: " + tool_call_format_list() + ")",
        "tools", "tool_calls_unsupported");
  tool_format_ = *model_->tool_format;
  if (!request_.tools.forced()) return std::nullopt;
  // required / a named function: a grammar over the tools' schemas forces the call.
  if (request_.params.structured_outputs.active())
    return invalid_request(
        "tool_choice 'required' or a named function cannot be combined with "
        "another structured-output constraint",
        "tool_choice");
  auto grammar = tool_call_grammar(request_.tools, tool_format_);
  if (!grammar) return invalid_request(grammar.message(), "tools");
  request_.params.structured_outputs.grammar = std::move(*grammar);
  return std::nullopt;
}

bool GenerationHandler::stream_tool_deltas(int32_t choice,
                                           std::vector<ToolCallStreamParser::Delta> deltas) {
  auto sink = live_sink();
  if (!sink) return false;
  for (ToolCallStreamParser::Delta& d : deltas) {
    if (d.index > 0 && !request_.tools.parallel) continue;  // parallel_tool_calls: false
    json chunk = stream_chunk(meta_, choice, d.content, false,
                              take_pending_logprobs(choices_[size_t(choice)]), nullptr,
                              request_.include_usage);
    if (d.index >= 0) {
      json call = {{"index", d.index}};
      if (!d.id.empty()) {
        call["id"] = d.id;
        call["type"] = "function";
        call["function"]["name"] = d.name;
      }
      call["function"]["arguments"] = d.arguments;
      chunk["choices"][0]["delta"] = json{{"tool_calls", json::array({std::move(call)})}};
    }
    if (!sink->stream_json(chunk)) {
      client_gone();
      return false;
    }
  }
  return true;
}

bool GenerationHandler::parses_reasoning() const {
  return request_.endpoint == Endpoint::kChatCompletions &&
         model_->reasoning != ReasoningFormat::kNone;
}

std::optional<ApiError> GenerationHandler::prepare_output_control(const std::string& prompt_text) {
  SamplingParams& p = request_.params;
  if (parses_reasoning()) {
    const reasoning::ThinkingMarkers markers = reasoning_markers(model_->reasoning);
    reasoning_begin_ = reasoning::initial_phase(markers, prompt_text);
    ReasoningControl& rc = p.reasoning;
    rc.start = markers.start;
    rc.end = markers.end;
    rc.implicit_start = markers.implicit_start;
    rc.end_tokens = model_->reasoning_end_tokens;
    rc.begin = reasoning_begin_ == reasoning::Phase::kThinking ? ReasoningControl::Begin::kThinking
               : reasoning_begin_ == reasoning::Phase::kAnswer
                   ? ReasoningControl::Begin::kAnswer
                   : ReasoningControl::Begin::kOutputDecides;
    rc.max_tokens = request_.max_reasoning_tokens;
  } else if (request_.max_reasoning_tokens >= 0) {
    return invalid_request(
        "'max_reasoning_tokens' needs a reasoning parser; this server runs with "
        "--reasoning-parser none (or its chat template writes no thinking block)",
        "max_reasoning_tokens");
  }
  if (request_.test_script) {
    if (!ctx_.options.test_scripted_output)
      return invalid_request(
          "'vela_test_script' is a test hook: start the server with --test-scripted-output",
          "vela_test_script");
    const Tokenizer& tokenizer = model_->engine->tokenizer();
    for (const std::string& piece : *request_.test_script) {
      const std::vector<int32_t> ids =
          tokenizer.encode(piece, /*add_special=*/false, /*parse_special=*/true);
      p.forced_tokens.insert(p.forced_tokens.end(), ids.begin(), ids.end());
    }
    if (request_.test_script_eos && tokenizer.eos_id() >= 0)
      p.forced_tokens.push_back(tokenizer.eos_id());
  }
  return std::nullopt;
}

json GenerationHandler::take_pending_logprobs(Choice& c) {
  if (c.pending_logprobs.empty()) return nullptr;
  json out = chat_logprobs(c.pending_logprobs);  // tool parsing is chat-only
  c.pending_logprobs.clear();
  return out;
}

void GenerationHandler::client_gone() {
  if (gone_) return;
  gone_ = true;
  deadline_.cancel();
  summary_.client_gone = true;
  if (!model_) return;
  for (const Choice& c : choices_)
    if (c.submitted && !c.finished) model_->engine->abort(c.engine_id);
}

}  // namespace vela::server
