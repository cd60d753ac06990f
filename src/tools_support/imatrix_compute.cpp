#include "tools_support/imatrix_compute.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "model/decoder_forward.h"
#include "tools_support/imatrix_collector.h"

namespace vela {

std::vector<int32_t> imatrix_tokens(const Tokenizer& tokenizer, std::string_view text,
                                    bool parse_special) {
  std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/true, parse_special);
  // The reference refuses models that add an EOS; dropping it keeps the text's own tokens.
  if (tokenizer.add_eos() && !ids.empty() && ids.back() == tokenizer.eos_id()) ids.pop_back();
  return ids;
}

Result<ImportanceMatrix> compute_imatrix(std::shared_ptr<const Model> model,
                                         std::span<const int32_t> tokens, int32_t bos,
                                         const ImatrixOptions& options,
                                         std::vector<std::string> datasets,
                                         const ImatrixProgress& progress) {
  const int32_t chunk = options.chunk_size;
  if (chunk <= 0) return make_error("the chunk size must be positive");
  const int64_t whole = int64_t(tokens.size()) / chunk;
  if (whole == 0)
    return make_error("the text has " + std::to_string(tokens.size()) +
                      " tokens, fewer than one chunk of " + std::to_string(chunk));
  const auto n_chunks =
      int32_t(options.max_chunks < 0 ? whole : std::min<int64_t>(whole, options.max_chunks));

  constexpr int32_t kBlockSize = 16;
  const int32_t n_blocks = (chunk + kBlockSize - 1) / kBlockSize;
  ForwardOptions forward_options;
  forward_options.max_batch_tokens = chunk;
  forward_options.max_logits = 1;  // none wanted: the output head is not collected
  forward_options.max_context = n_blocks * kBlockSize;
  forward_options.n_threads = options.n_threads;
  DecoderForward forward(model, forward_options);
  KvCache cache(model_cache_config(model->config(), kBlockSize, n_blocks, options.kv_type,
                                   /*n_state_slots=*/1));
  ImatrixCollector collector(*model);
  forward.set_activation_observer(&collector);

  std::vector<int32_t> ids(size_t(chunk), 0);        // [chunk] this chunk's tokens
  std::vector<int32_t> positions(size_t(chunk), 0);  // [chunk] 0, 1, ...
  std::iota(positions.begin(), positions.end(), 0);
  const std::vector<int32_t> seq(size_t(chunk), 0);           // [chunk] all of sequence 0
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));  // [n_blocks] blocks 0, 1, ...
  std::iota(table.begin(), table.end(), 0);
  const int32_t state_slot = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < n_chunks; ++i) {
    std::copy_n(tokens.begin() + int64_t(i) * chunk, chunk, ids.begin());
    if (bos >= 0) ids[0] = bos;
    ForwardBatch batch{ids, positions, seq, table, n_blocks};
    batch.state_slots = std::span<const int32_t>(&state_slot, 1);
    if (Status s = forward.forward(batch, cache, {}); !s)
      return make_error("chunk " + std::to_string(i) + ": " + s.message());
    if (progress)
      progress(i + 1, n_chunks,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  forward.set_activation_observer(nullptr);
  return collector.result(std::move(datasets), n_chunks, chunk);
}

}  // namespace vela
