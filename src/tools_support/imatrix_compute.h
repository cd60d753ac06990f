#pragma once
// `vela imatrix`'s computation: a calibration text tokenized and cut into chunks as the reference
// engine's imatrix tool does, each chunk run through the model as one sequence from position 0
// with an ImatrixCollector watching, the sums returned as an ImportanceMatrix.
// Thread-safety: compute_imatrix runs one pass at a time on its own pool; the model is shared.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools_support/imatrix_file.h"
#include "util/result.h"

namespace vela {

struct ImatrixOptions {
  int32_t chunk_size = 256;       // tokens per chunk, each run from position 0
  int32_t max_chunks = -1;        // at most this many chunks (< 0: every whole chunk of the text)
  int32_t n_threads = 0;          // threads of the pass; 0 = physical cores
  KvType kv_type = KvType::kF16;  // the reference engine's default cache type
};

// The whole text's tokens as the reference tool takes them: BOS first where the model adds one,
// never an EOS; special-token texts parsed only when parse_special.
std::vector<int32_t> imatrix_tokens(const Tokenizer& tokenizer, std::string_view text,
                                    bool parse_special);

// Called after each chunk: chunks done, chunks in all, seconds since the first began.
using ImatrixProgress = std::function<void(int32_t done, int32_t total, double seconds)>;

// Chunk i is tokens [i * chunk_size, (i + 1) * chunk_size), its first token replaced by `bos`
// (bos < 0: kept) as the reference does for every chunk; the tail shorter than a chunk is
// dropped. An error when the tokens do not fill one chunk. datasets go into the result as given.
Result<ImportanceMatrix> compute_imatrix(std::shared_ptr<const Model> model,
                                         std::span<const int32_t> tokens, int32_t bos,
                                         const ImatrixOptions& options,
                                         std::vector<std::string> datasets,
                                         const ImatrixProgress& progress = {});

}  // namespace vela
