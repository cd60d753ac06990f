#include "model/llama_forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/attention.h"
#include "model/layer_ops.h"
#include "quant/dequantize.h"

namespace vela {

LlamaForward::LlamaForward(std::shared_ptr<const Model> model, const ForwardOptions& options)
    : model_(std::move(model)),
      options_(options),
      attn_scratch_(options.max_context, model_->config().head_dim) {
  const ModelConfig& c = model_->config();
  const size_t T = size_t(options_.max_batch_tokens);
  const size_t q_dim = size_t(c.n_head) * size_t(c.head_dim);
  const size_t kv_dim = size_t(c.n_head_kv) * size_t(c.head_dim);
  x_.resize(T * size_t(c.n_embd));
  xn_.resize(T * size_t(c.n_embd));
  q_.resize(T * q_dim);
  k_.resize(T * kv_dim);
  v_.resize(T * kv_dim);
  attn_.resize(T * q_dim);
  gate_.resize(T * size_t(c.n_ff));
  up_.resize(T * size_t(c.n_ff));
  proj_.resize(T * size_t(c.n_embd));
  rope_cs_.resize(T * size_t(c.n_rot));
  slots_.resize(T);
  final_.resize(size_t(options_.max_logits) * size_t(c.n_embd));

  // Inverse frequency of each rotated pair: base^(-2i/n_rot), divided by the model's per-pair
  // factors when it has them (Llama 3.1 long-context scaling).
  const auto& factors = model_->weights().rope_freq_factors;
  rope_freqs_.resize(size_t(c.n_rot / 2));
  for (int32_t i = 0; i < c.n_rot / 2; ++i) {
    double f = std::pow(double(c.rope_freq_base), -2.0 * i / double(c.n_rot));
    if (!factors.empty()) f /= double(factors[size_t(i)]);
    rope_freqs_[size_t(i)] = static_cast<float>(f);
  }

  // Room for the largest quantized activation any matmul of the pass needs.
  size_t scratch = 0;
  const auto need = [&](const WeightMatrix& m, int64_t rows) {
    scratch = std::max(scratch, matmul_scratch_bytes(m.type, m.n_cols, rows));
  };
  for (const LayerWeights& l : model_->weights().layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      need(*m, options_.max_batch_tokens);
  need(model_->weights().output, options_.max_logits);
  scratch_.reserve(scratch);
}

void LlamaForward::matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  vela::matmul(w.type, w.data, w.n_rows, w.n_cols, x, n_tokens, y, scratch_);
}

Status LlamaForward::validate(const ForwardBatch& b, const KvCache& cache, size_t logits_size) const {
  const ModelConfig& c = model_->config();
  const int32_t T = b.n_tokens();
  if (T == 0) return make_error("empty batch");
  if (T > options_.max_batch_tokens)
    return make_error("batch of " + std::to_string(T) + " tokens exceeds max_batch_tokens " +
                      std::to_string(options_.max_batch_tokens));
  if (b.positions.size() != size_t(T) || b.seq_index.size() != size_t(T))
    return make_error("batch positions/seq_index sizes differ from the token count");
  if (b.max_blocks_per_seq <= 0 || b.block_tables.size() % size_t(b.max_blocks_per_seq) != 0)
    return make_error("batch block table shape is invalid");
  const KvCacheConfig& kc = cache.config();
  if (kc.n_layer != c.n_layer || kc.n_head_kv != c.n_head_kv || kc.head_dim != c.head_dim)
    return make_error("KV cache geometry does not match the model");
  for (int32_t b_id : b.block_tables)
    if (b_id < -1 || b_id >= kc.n_blocks) return make_error("block id " + std::to_string(b_id) + " out of range");
  const int32_t n_seqs = b.n_seqs();
  for (int32_t t = 0; t < T; ++t) {
    const int32_t id = b.token_ids[size_t(t)];
    if (id < 0 || id >= c.n_vocab)
      return make_error("token id " + std::to_string(id) + " out of range [0, " + std::to_string(c.n_vocab) + ")");
    const int32_t pos = b.positions[size_t(t)];
    if (pos < 0 || pos >= options_.max_context)
      return make_error("position " + std::to_string(pos) + " out of range [0, " +
                        std::to_string(options_.max_context) + ")");
    const int32_t s = b.seq_index[size_t(t)];
    if (s < 0 || s >= n_seqs) return make_error("token's sequence index out of range");
    // Every position up to pos must have a block (earlier ones hold this sequence's cached K/V).
    if (pos / kc.block_size >= b.max_blocks_per_seq ||
        b.block_tables[size_t(s) * size_t(b.max_blocks_per_seq) + size_t(pos / kc.block_size)] < 0)
      return make_error("no KV block for position " + std::to_string(pos));
  }
  if (b.logits_indices.size() > size_t(options_.max_logits))
    return make_error("too many logits rows requested");
  for (int32_t i : b.logits_indices)
    if (i < 0 || i >= T) return make_error("logits index out of range");
  if (logits_size < b.logits_indices.size() * size_t(c.n_vocab))
    return make_error("logits buffer too small");
  return {};
}

Status LlamaForward::forward(const ForwardBatch& b, KvCache& cache, std::span<float> logits) {
  if (auto st = validate(b, cache, logits.size()); !st) return st;
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t T = b.n_tokens();
  const int64_t E = c.n_embd;
  const int64_t q_dim = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_dim = int64_t(c.n_head_kv) * c.head_dim;
  const int32_t bs = cache.config().block_size;

  for (int64_t t = 0; t < T; ++t) {
    const int32_t s = b.seq_index[size_t(t)];
    const int32_t pos = b.positions[size_t(t)];
    const int32_t block = b.block_tables[size_t(s) * size_t(b.max_blocks_per_seq) + size_t(pos / bs)];
    slots_[size_t(t)] = int64_t(block) * bs + pos % bs;
    const auto* row = static_cast<const uint8_t*>(w.token_embd.data) + b.token_ids[size_t(t)] * w.token_embd.row_bytes;
    dequantize_row(w.token_embd.type, row, x_.data() + t * E, E);
  }
  rope_tables(b.positions.data(), T, rope_freqs_.data(), c.n_rot, c.rope_freq_scale, rope_cs_.data());

  const AttentionParams attn{c.n_head, c.n_head_kv, c.head_dim, c.sliding_window,
                             1.0f / std::sqrt(float(c.head_dim))};
  for (int32_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = w.layers[size_t(il)];
    // Attention block.
    rms_norm(x_.data(), l.attn_norm.data(), T, E, c.rms_eps, xn_.data());
    matmul(l.wq, xn_.data(), T, q_.data());
    matmul(l.wk, xn_.data(), T, k_.data());
    matmul(l.wv, xn_.data(), T, v_.data());
    if (!l.bq.empty()) add_bias(q_.data(), l.bq.data(), T, q_dim);
    if (!l.bk.empty()) add_bias(k_.data(), l.bk.data(), T, kv_dim);
    if (!l.bv.empty()) add_bias(v_.data(), l.bv.data(), T, kv_dim);
    rope_apply(q_.data(), T, c.n_head, c.head_dim, c.n_rot, c.rope_style, rope_cs_.data());
    rope_apply(k_.data(), T, c.n_head_kv, c.head_dim, c.n_rot, c.rope_style, rope_cs_.data());
    // All of the batch's K/V go in first, so a token can attend to earlier tokens of its own chunk.
    for (int64_t t = 0; t < T; ++t) cache.write(il, slots_[size_t(t)], k_.data() + t * kv_dim, v_.data() + t * kv_dim);
    for (int64_t t = 0; t < T; ++t) {
      const int32_t s = b.seq_index[size_t(t)];
      attention_one_token(cache, il, attn, q_.data() + t * q_dim, b.positions[size_t(t)],
                          b.block_tables.data() + size_t(s) * size_t(b.max_blocks_per_seq),
                          attn_.data() + t * q_dim, attn_scratch_);
    }
    matmul(l.wo, attn_.data(), T, proj_.data());
    add_inplace(x_.data(), proj_.data(), T * E);

    // Feed-forward block (SwiGLU).
    rms_norm(x_.data(), l.ffn_norm.data(), T, E, c.rms_eps, xn_.data());
    matmul(l.w_gate, xn_.data(), T, gate_.data());
    matmul(l.w_up, xn_.data(), T, up_.data());
    silu_mul(gate_.data(), up_.data(), T * c.n_ff);
    matmul(l.w_down, gate_.data(), T, proj_.data());
    add_inplace(x_.data(), proj_.data(), T * E);
  }

  // Output head only for the rows that want logits.
  const int64_t n_logits = int64_t(b.logits_indices.size());
  for (int64_t i = 0; i < n_logits; ++i)
    rms_norm(x_.data() + int64_t(b.logits_indices[size_t(i)]) * E, w.output_norm.data(), 1, E, c.rms_eps,
             final_.data() + i * E);
  if (n_logits > 0) matmul(w.output, final_.data(), n_logits, logits.data());
  return {};
}

}  // namespace vela
