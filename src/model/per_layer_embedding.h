#pragma once
// Per-layer embeddings (Gemma 4 E2B/E4B): besides its embedding, each token has P =
// n_embd_per_layer values per layer, the sum of a row of per_layer_token_embd (times sqrt(P)) and
// a projection of its scaled embedding (per_layer_model_proj / sqrt(n_embd), RMS-normalised per
// layer with per_layer_proj_norm), times 1/sqrt(2). At the end of layer i, after the FFN's
// residual, x += post_norm(proj(gelu(inp_gate x) * input_i)), the reference's order.
// Thread-safety: one pass at a time (it owns its buffers); owned by one DecoderForward.
#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "model/projector.h"
#include "util/thread_pool.h"

namespace vela {

class PerLayerEmbedding {
 public:
  // Buffers sized once for max_tokens tokens; reserves room in `projector` for its products.
  PerLayerEmbedding(const Model& model, int32_t max_tokens, Projector& projector);

  // Every layer's input of each token: token_ids [T]; x [T, n_embd] the scaled embeddings.
  void prepare(std::span<const int32_t> token_ids, const float* x, int64_t n_tokens,
               Projector& projector, ThreadPool& pool, int64_t min_work);

  // x += layer il's per-layer embedding term.  x: [T, n_embd]
  void apply(const LayerWeights& l, int32_t il, float* x, int64_t n_tokens, Projector& projector,
             ThreadPool& pool, int64_t min_work);

 private:
  const Model& model_;
  int32_t n_layer_ = 0;
  int32_t width_ = 0;          // P = n_embd_per_layer
  std::vector<float> inputs_;  // [T, n_layer, P] every layer's input of each token
  std::vector<float> gate_;    // [T, P] gelu(inp_gate x) * the layer's input
  std::vector<float> out_;     // [T, n_embd] the projection back to the stream
  std::vector<float> row_;     // [T, n_layer * P] per_layer_token_embd rows
};

}  // namespace vela
