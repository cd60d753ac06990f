#include "server/embeddings_handler.h"

#include <cstring>
#include <limits>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "server/openai_response.h"
#include "server/request_workers.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit per request

std::string base64_floats(const std::vector<float>& values) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian hosts only (x86)
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = uint8_t(bytes[i]);
    const uint32_t b1 = i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? uint8_t(bytes[i + 2]) : 0;
    const uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

bool token_ids(const json& v, std::vector<int32_t>& out) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& t : v) {
    if (!t.is_number_integer()) return false;
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) return false;
    out.push_back(int32_t(id));
  }
  return true;
}

}  // namespace

EmbeddingsHandler::EmbeddingsHandler(ServerContext& ctx, std::weak_ptr<ResponseSink> sink)
    : ctx_(ctx), sink_(std::move(sink)) {}

void EmbeddingsHandler::fail(const ApiError& error) {
  responded_ = true;
  if (auto sink = gone_ ? nullptr : sink_.lock()) sink->send_json(error.status, error_body(error));
}

void EmbeddingsHandler::start(std::string body) {
  model_ = ctx_.model;
  if (!model_)
    return fail(ApiError{503, "the model is still loading", "service_unavailable", "", ""});
  if (ctx_.draining)
    return fail(ApiError{503, "the server is shutting down", "service_unavailable", "", ""});
  const size_t bytes = body.size();
  // The worker hands its reference to the IO thread, where the handler's last one drops.
  auto work = [self = shared_from_this(), body = std::move(body)]() mutable {
    auto error = self->prepare(body);
    auto& io = self->ctx_.io;
    boost::asio::post(io, [self = std::move(self), error = std::move(error)] {
      if (self->gone_ || self->responded_) return;
      if (error) return self->fail(*error);
      self->submit();
    });
  };
  if (!ctx_.workers) return work();
  ctx_.workers->post(bytes, std::move(work));
}

std::optional<ApiError> EmbeddingsHandler::prepare(std::string_view body) {
  if (json_nesting_depth(body) > 64) return invalid_request("the JSON body is nested too deeply");
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception& e) {
    return invalid_request(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return invalid_request("the body must be a JSON object");
  if (auto m = doc.find("model"); m != doc.end() && !m->is_null()) {
    if (!m->is_string()) return invalid_request("'model' must be a string", "model");
    const std::string name = m->get<std::string>();
    if (!name.empty() && name != ctx_.options.served_model_name)
      return ApiError{404,
                      "The model '" + name + "' does not exist; this server serves '" +
                          ctx_.options.served_model_name + "'",
                      "invalid_request_error", "model", "model_not_found"};
  }
  if (auto f = doc.find("encoding_format"); f != doc.end() && !f->is_null()) {
    if (*f != "float" && *f != "base64")
      return invalid_request("'encoding_format' must be \"float\" or \"base64\"",
                             "encoding_format");
    base64_ = *f == "base64";
  }
  if (auto d = doc.find("dimensions"); d != doc.end() && !d->is_null())
    return invalid_request("'dimensions' is not supported: the embedding has the model's width",
                           "dimensions");
  const char* kShape =
      "'input' must be a non-empty string, an array of strings, an array of token ids or an "
      "array of token-id arrays";
  auto in = doc.find("input");
  if (in == doc.end()) return invalid_request("'input' is required", "input");
  const Tokenizer& tokenizer = model_->engine->tokenizer();
  auto text_tokens = [&](const json& s) {
    return tokenizer.encode(s.get_ref<const std::string&>(), /*add_special=*/true,
                            /*parse_special=*/true);
  };
  if (in->is_string()) {
    inputs_.push_back(text_tokens(*in));
  } else if (in->is_array() && !in->empty() && in->size() <= kMaxInputs) {
    if ((*in)[0].is_number_integer()) {
      inputs_.emplace_back();
      if (!token_ids(*in, inputs_.back())) return invalid_request(kShape, "input");
    } else {
      for (const json& item : *in) {
        inputs_.emplace_back();
        if (item.is_string())
          inputs_.back() = text_tokens(item);
        else if (!token_ids(item, inputs_.back()))
          return invalid_request(kShape, "input");
      }
    }
  } else {
    return invalid_request(in->is_array() && in->size() > kMaxInputs
                               ? "at most " + std::to_string(kMaxInputs) + " inputs per request"
                               : std::string(kShape),
                           "input");
  }
  const int32_t n_vocab = tokenizer.n_vocab();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<int32_t>& t = inputs_[i];
    if (t.empty()) return invalid_request("input " + std::to_string(i) + " is empty", "input");
    for (int32_t id : t)
      if (id >= n_vocab)
        return invalid_request("token id " + std::to_string(id) +
                                   " is out of range (vocabulary of " + std::to_string(n_vocab) +
                                   ")",
                               "input");
    if (int64_t(t.size()) >= model_->max_model_len)
      return invalid_request("input " + std::to_string(i) + " has " + std::to_string(t.size()) +
                                 " tokens; this model's maximum context length is " +
                                 std::to_string(model_->max_model_len) + " tokens",
                             "input", "context_length_exceeded");
    prompt_tokens_ += int64_t(t.size());
  }
  results_.resize(inputs_.size());
  return std::nullopt;
}

void EmbeddingsHandler::submit() {
  AsyncEngine& engine = *model_->engine;
  const Pooling pooling = ctx_.options.embedding_pooling;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    auto id = engine.submit_embedding(std::move(inputs_[i]), pooling, 0,
                                      [self = shared_from_this(), i](const RequestEvent& e) {
                                        if (e.finished) self->on_done(i, e);
                                      });
    if (!id) {
      for (uint64_t other : engine_ids_) engine.abort(other);
      const std::string& m = id.message();
      if (m.rfind(AsyncEngine::kQueueFull, 0) == 0)
        return fail(
            ApiError{429, "the server is busy: " + m, "rate_limit_error", "", "queue_full"});
      return fail(ApiError{m.find("shutting down") != std::string::npos ? 503 : 400, m,
                           "invalid_request_error", "input", ""});
    }
    engine_ids_.push_back(*id);
  }
}

void EmbeddingsHandler::on_done(size_t index, const RequestEvent& e) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (e.embedding.empty())
      failed_ = true;
    else
      results_[index].assign(e.embedding.begin(), e.embedding.end());
    last = ++n_done_ == results_.size();
  }
  if (last) boost::asio::post(ctx_.io, [self = shared_from_this()] { self->respond(); });
}

void EmbeddingsHandler::respond() {
  if (gone_ || responded_) return;
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);  // every callback is done: only for the record
    failed = failed_;
  }
  if (failed)
    return fail(ApiError{503, "the embedding was cancelled (the server is shutting down)",
                         "service_unavailable", "", ""});
  responded_ = true;
  json data = json::array();
  for (size_t i = 0; i < results_.size(); ++i) {
    json item{{"object", "embedding"}, {"index", i}};
    if (base64_)
      item["embedding"] = base64_floats(results_[i]);
    else
      item["embedding"] = results_[i];
    data.push_back(std::move(item));
  }
  json out{{"object", "list"},
           {"data", std::move(data)},
           {"model", ctx_.options.served_model_name},
           {"usage", {{"prompt_tokens", prompt_tokens_}, {"total_tokens", prompt_tokens_}}}};
  if (auto sink = sink_.lock()) sink->send_json(200, dump_json(out));
}

void EmbeddingsHandler::client_gone() {
  if (gone_) return;
  gone_ = true;
  if (!model_) return;
  for (uint64_t id : engine_ids_) model_->engine->abort(id);
}

}  // namespace vela::server
