#include "model/per_layer_embedding.h"

#include <cmath>

#include "model/layer_ops.h"
#include "model/pass_parallel.h"

namespace vela {

PerLayerEmbedding::PerLayerEmbedding(const Model& model, int32_t max_tokens, Projector& projector)
    : model_(model), n_layer_(model.config().n_layer), width_(model.config().n_embd_per_layer) {
  const size_t T = size_t(max_tokens), all = size_t(n_layer_) * size_t(width_);
  inputs_.resize(T * all);
  row_.resize(T * all);
  gate_.resize(T * size_t(width_));
  out_.resize(T * size_t(model.config().n_embd));
  projector.reserve(model.weights().per_layer_model_proj, max_tokens);
}

void PerLayerEmbedding::prepare(std::span<const int32_t> token_ids, const float* x,
                                int64_t n_tokens, Projector& projector, ThreadPool& pool,
                                int64_t min_work) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  const int64_t P = width_, all = int64_t(n_layer_) * P;
  projector.project(x, n_tokens, {{&w.per_layer_model_proj, inputs_.data()}});
  const float proj_scale = 1.0f / std::sqrt(float(c.n_embd));
  const float token_scale = std::sqrt(float(P));
  const float input_scale = 1.0f / std::sqrt(2.0f);
  parallel_ranges(pool, n_tokens, all * 4, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* in = inputs_.data() + t * all;
      for (int64_t i = 0; i < all; ++i) in[i] *= proj_scale;
      rms_norm(in, w.per_layer_proj_norm.data(), n_layer_, P, c.rms_eps, in);
      float* tok = row_.data() + t * all;
      // Never repacked (model_weights.cpp), so no scratch row.
      embedding_row(w.per_layer_token_embd, token_ids[size_t(t)], nullptr, tok);
      for (int64_t i = 0; i < all; ++i) in[i] = (in[i] + tok[i] * token_scale) * input_scale;
    }
  });
}

void PerLayerEmbedding::apply(const LayerWeights& l, int32_t il, float* x, int64_t n_tokens,
                              Projector& projector, ThreadPool& pool, int64_t min_work) {
  const ModelConfig& c = model_.config();
  const int64_t P = width_, E = c.n_embd, all = int64_t(n_layer_) * P;
  projector.project(x, n_tokens, {{&l.ple_gate, gate_.data()}});
  parallel_ranges(pool, n_tokens, P * 16, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      gelu_tanh_mul(gate_.data() + t * P, inputs_.data() + t * all + il * P, P);
  });
  projector.project(gate_.data(), n_tokens, {{&l.ple_proj, out_.data()}});
  parallel_ranges(pool, n_tokens, E * 2, min_work, [&](int64_t t0, int64_t t1) {
    rms_norm(out_.data() + t0 * E, l.ple_post_norm.data(), t1 - t0, E, c.rms_eps,
             out_.data() + t0 * E);
    add_inplace(x + t0 * E, out_.data() + t0 * E, (t1 - t0) * E);
  });
}

}  // namespace vela
