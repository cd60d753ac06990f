#include "model/tensor_shard.h"

#include <algorithm>

namespace vela {

namespace {
std::string str(int64_t v) {
  return std::to_string(v);
}
}  // namespace

Result<LayerRange> stage_layers(int32_t n_layer, int32_t stage, int32_t n_stages) {
  if (n_stages < 1 || stage < 0 || stage >= n_stages)
    return make_error("stage " + str(stage) + " is outside a pipeline of " + str(n_stages) +
                      " stages");
  if (n_layer < n_stages)
    return make_error(str(n_layer) + " layers do not split over " + str(n_stages) +
                      " pipeline stages");
  const auto begin = [&](int32_t s) { return int32_t(int64_t(n_layer) * s / n_stages); };
  return LayerRange{begin(stage), begin(stage + 1) - begin(stage)};
}

int32_t most_stage_layers(int32_t n_layer, int32_t n_stages) {
  int32_t most = 0;
  for (int32_t s = 0; s < n_stages; ++s) {
    const auto layers = stage_layers(n_layer, s, n_stages);
    if (!layers) return n_layer;
    most = std::max(most, layers->count);
  }
  return most > 0 ? most : n_layer;
}

int64_t shard_vocab_begin(int64_t n_vocab, const TensorShard& shard) {
  if (shard.rank >= shard.size) return n_vocab;
  const int64_t groups = (n_vocab + 15) / 16;
  return std::min(n_vocab, groups * shard.rank / shard.size * 16);
}

std::vector<IndexRun> delta_value_head_runs(const DeltaNetConfig& d, const ShardRanges& r) {
  std::vector<IndexRun> runs;
  if (d.n_k_heads <= 0 || r.n_delta_k_heads <= 0) return runs;
  const int64_t per_key_head = d.n_v_heads / d.n_k_heads;
  if (d.grouped_value_heads)
    return {{r.delta_k_head_begin * per_key_head, r.n_delta_k_heads * per_key_head}};
  for (int64_t j = 0; j < per_key_head; ++j)
    runs.push_back({j * d.n_k_heads + r.delta_k_head_begin, r.n_delta_k_heads});
  return runs;
}

Result<ShardRanges> shard_ranges(const ModelConfig& c, const TensorShard& s,
                                 int64_t attn_block_cols, int64_t down_block_cols,
                                 int64_t shared_down_block_cols, int64_t delta_out_block_cols) {
  ShardRanges r;
  auto layers = stage_layers(c.n_layer, s.stage, s.n_stages);
  if (!layers) return layers.error();
  r.layer_begin = layers->begin;
  r.n_layer = layers->count;
  const bool uniform_layers =
      std::all_of(c.layers.begin(), c.layers.end(), [&](const LayerConfig& l) {
        // Zero: a config built by hand without per-layer values, the model's.
        const auto same = [](int32_t v, int32_t model) { return v == 0 || v == model; };
        return same(l.n_head_kv, c.n_head_kv) && same(l.head_dim, c.head_dim) &&
               same(l.n_ff, c.n_ff);
      });
  if ((!uniform_layers || c.n_shared_kv_layers > 0 || c.n_embd_per_layer > 0 ||
       c.arch->moe_beside_dense) &&
      (s.sharded() || s.n_stages > 1))
    return make_error(
        "tensor and pipeline parallelism do not split a model with per-layer head geometry, "
        "shared KV layers, per-layer embeddings or experts beside a dense FFN (" +
        c.arch_name + ")");
  if (s.size < 1 || s.rank < 0 || s.rank >= s.size)
    return make_error("rank " + str(s.rank) + " is outside a tensor-parallel group of " +
                      str(s.size));
  if (!s.sharded()) {
    r.n_head = c.n_head;
    r.n_head_kv = c.n_head_kv;
    r.n_ff = c.n_ff;
    r.n_vocab = c.n_vocab;
    r.n_expert = c.n_expert;
    r.n_shared_ff = c.n_ff_shared_expert;
    r.n_delta_k_heads = c.delta_net.n_k_heads;
    r.n_delta_v_heads = c.delta_net.n_v_heads;
    return r;
  }
  const std::string size = str(s.size);
  // Dense FFN layers: all of a dense model's, the leading ones of a mixture of experts.
  const bool dense_layers = !c.moe() || std::any_of(c.layers.begin(), c.layers.end(),
                                                    [](const LayerConfig& l) { return !l.moe; });
  if (c.arch->qk_norm == QkNorm::kWhole)
    return make_error("tensor parallelism does not split a Q/K norm over all heads (" +
                      c.arch_name + ")");
  if (c.n_head % s.size != 0)
    return make_error(str(c.n_head) + " attention heads do not split over " + size + " ranks");
  if (c.n_head_kv % s.size != 0 && s.size % c.n_head_kv != 0)
    return make_error(str(c.n_head_kv) + " KV heads neither split over nor replicate to " + size +
                      " ranks");
  const DeltaNetConfig& d = c.delta_net;
  if (c.recurrent() && (d.n_k_heads % s.size != 0 || d.n_v_heads % d.n_k_heads != 0))
    return make_error(str(d.n_k_heads) + " DeltaNet key heads (serving " + str(d.n_v_heads) +
                      " value heads) do not split over " + size + " ranks");
  if (c.moe() && c.n_expert % s.size != 0)
    return make_error(str(c.n_expert) + " experts do not split over " + size + " ranks");
  if (dense_layers && c.n_ff % s.size != 0)
    return make_error("the FFN width " + str(c.n_ff) + " does not split over " + size + " ranks");
  r.n_head = c.n_head / s.size;
  r.head_begin = s.rank * r.n_head;
  if (c.n_head_kv >= s.size) {
    r.n_head_kv = c.n_head_kv / s.size;
    r.kv_head_begin = s.rank * r.n_head_kv;
  } else {  // each KV head serves size / n_head_kv ranks, whose query heads are all its own
    r.n_head_kv = 1;
    r.kv_head_begin = s.rank / (s.size / c.n_head_kv);
  }
  if (c.moe()) {
    r.n_expert = c.n_expert / s.size;
    r.expert_begin = s.rank * r.n_expert;
  }
  if (dense_layers) {
    r.n_ff = c.n_ff / s.size;
    r.ff_begin = s.rank * r.n_ff;
  }
  if (c.n_ff_shared_expert > 0) {
    const int64_t per_rank = c.n_ff_shared_expert / s.size;
    r.replicated_shared_expert =
        c.n_ff_shared_expert % s.size != 0 || per_rank % shared_down_block_cols != 0;
    r.n_shared_ff = r.replicated_shared_expert ? c.n_ff_shared_expert : per_rank;
    r.shared_ff_begin = r.replicated_shared_expert ? 0 : s.rank * per_rank;
  }
  if (c.recurrent()) {
    r.n_delta_k_heads = d.n_k_heads / s.size;
    r.delta_k_head_begin = s.rank * r.n_delta_k_heads;
    r.n_delta_v_heads = d.n_v_heads / s.size;
    // Every rank's runs (delta_value_head_runs) start at a multiple of their width.
    const int64_t run_heads = d.grouped_value_heads ? r.n_delta_v_heads : r.n_delta_k_heads;
    r.replicated_delta_out = run_heads * d.head_v_dim % delta_out_block_cols != 0;
  }
  // Each head's columns of the attention output: its value width under latent attention (whose
  // head_dim is the cache row's width).
  const int64_t head_out = c.latent_attention() ? c.mla.v_head_dim : c.head_dim;
  r.replicated_attn_output = int64_t(r.n_head) * head_out % attn_block_cols != 0;
  r.replicated_ffn_down = dense_layers && r.n_ff % down_block_cols != 0;
  r.vocab_begin = shard_vocab_begin(c.n_vocab, s);
  r.n_vocab = shard_vocab_begin(c.n_vocab, {s.rank + 1, s.size}) - r.vocab_begin;
  if (r.n_vocab <= 0) return make_error("the vocabulary is too small for " + size + " ranks");
  return r;
}

ModelConfig shard_config(const ModelConfig& c, const ShardRanges& r) {
  ModelConfig local = c;
  local.n_head = r.n_head;
  local.n_head_kv = r.n_head_kv;
  if (r.n_ff > 0) local.n_ff = int32_t(r.n_ff);  // else no dense layer reads it
  local.n_ff_shared_expert = int32_t(r.n_shared_ff);
  local.delta_net.n_k_heads = r.n_delta_k_heads;
  local.delta_net.n_v_heads = r.n_delta_v_heads;
  if (r.n_layer != c.n_layer) {
    local.n_layer = r.n_layer;
    local.layers.assign(c.layers.begin() + r.layer_begin,
                        c.layers.begin() + r.layer_begin + r.n_layer);
    // The stage's cache holds its own layers only.
    local.n_kv_layers = local.n_state_layers = 0;
    for (LayerConfig& l : local.layers) {
      if (l.kv_source >= 0) l.kv_source -= int32_t(r.layer_begin);
      if (l.kv_index >= 0) l.kv_index = local.n_kv_layers++;
      if (l.state_index >= 0) l.state_index = local.n_state_layers++;
    }
  }
  // A split model's layers all have the model's geometry (shard_ranges): the slice's. A model
  // kept whole keeps each layer's own.
  for (LayerConfig& l : local.layers) {
    if (l.n_head_kv == c.n_head_kv) l.n_head_kv = local.n_head_kv;
    if (l.n_ff == c.n_ff) l.n_ff = local.n_ff;
  }
  return local;
}

}  // namespace vela
