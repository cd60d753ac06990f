#pragma once
// POST /v1/embeddings (OpenAI's shapes): "input" is a string, an array of strings, an array of
// token ids or an array of token-id arrays; each input's embedding is the final hidden state of
// its tokens, mean-pooled or the last token's (--embedding-pooling), L2-normalised, computed by
// the engine batched with everything else. "encoding_format" "float" (default) or "base64"
// (little-endian float32, as OpenAI's clients decode it).
//   -> {"object":"list","data":[{"object":"embedding","index":0,"embedding":[...]}, ...],
//       "model":"...","usage":{"prompt_tokens":N,"total_tokens":N}}
//
// Thread-safety: start() and client_gone() run on the io_context thread; parsing and
// tokenization on a request worker (the io_context thread touches nothing they write until
// the hand-back post); engine callbacks on the engine thread touch only the results (under the
// mutex) and post once when the last input is done.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/generation_handler.h"

namespace vela::server {

class EmbeddingsHandler : public std::enable_shared_from_this<EmbeddingsHandler> {
 public:
  EmbeddingsHandler(ServerContext& ctx, std::weak_ptr<ResponseSink> sink);

  void start(std::string body);
  void client_gone();  // cancel what is still computing; answer nothing
  int64_t prompt_tokens() const { return prompt_tokens_; }

 private:
  std::optional<ApiError> prepare(std::string_view body);  // request worker
  void submit();
  void on_done(size_t index, const RequestEvent& e);  // engine thread
  void respond();
  void fail(const ApiError& error);

  ServerContext& ctx_;
  std::weak_ptr<ResponseSink> sink_;
  std::shared_ptr<const LoadedModel> model_;
  bool base64_ = false;
  std::vector<std::vector<int32_t>> inputs_;  // tokens of each input
  std::vector<uint64_t> engine_ids_;
  int64_t prompt_tokens_ = 0;
  bool gone_ = false;
  bool responded_ = false;

  std::mutex mutex_;                         // guards results_, n_done_, failed_
  std::vector<std::vector<float>> results_;  // [n_inputs][n_embd]
  size_t n_done_ = 0;
  bool failed_ = false;  // an input was aborted (shutdown)
};

}  // namespace vela::server
