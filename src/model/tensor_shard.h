#pragma once
// Which part of a model one rank of a tensor-parallel group holds: attention split by heads
// (KV heads replicated when there are fewer than ranks; multi-head latent attention keeps its
// shared latent projections and cache row whole on every rank, and splits the per-head
// matrices), the dense FFN split by its inner dimension (gate/up by rows, down by columns), a
// mixture-of-experts FFN by experts (each rank runs whole experts of its own: expert
// parallelism) with its shared expert split like a dense FFN, a Gated DeltaNet mixer by key
// heads (each rank takes the value heads that read its key heads, their channels of the
// convolution and their recurrent state), the output head by vocabulary rows.
// Column splits fall on quantization block boundaries, so each rank's slice is whole blocks.
// Plain value types and pure functions; no shared state.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "util/result.h"

namespace vela {

// One rank's place in a group of n_stages pipeline stages (contiguous layers each), each stage
// a tensor-parallel group of `size` ranks.
struct TensorShard {
  int32_t rank = 0;      // in [0, size): the rank within its stage
  int32_t size = 1;      // tensor-parallel ranks of a stage; 1 = whole layers
  int32_t stage = 0;     // in [0, n_stages)
  int32_t n_stages = 1;  // pipeline stages; 1 = every layer
  bool sharded() const { return size > 1; }
  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == n_stages - 1; }
};

// Index ranges [begin, begin + count) of one rank's slice of each split dimension.
struct ShardRanges {
  int32_t head_begin = 0, n_head = 0;        // query heads
  int32_t kv_head_begin = 0, n_head_kv = 0;  // KV heads (replicated when n_head_kv < size)
  // Dense FFN inner dimension: of every layer of a dense model, of the leading dense layers of
  // a mixture of experts (0 when sharded and no layer is dense).
  int64_t ff_begin = 0, n_ff = 0;
  int64_t vocab_begin = 0, n_vocab = 0;          // output head rows
  int32_t expert_begin = 0, n_expert = 0;        // mixture-of-experts: the experts this rank runs
  int64_t shared_ff_begin = 0, n_shared_ff = 0;  // the shared expert's inner dimension
  int32_t layer_begin = 0, n_layer = 0;          // this pipeline stage's layers
  // A column slice that would not be whole quantization blocks keeps the matrix whole on every
  // rank instead: the ranks then gather the matrix's input and each computes the full product.
  bool replicated_attn_output = false;
  bool replicated_ffn_down = false;
  // The shared expert whole on every rank (its width does not split into whole blocks of its
  // down matrix): each rank computes all of it and adds it after the experts' sum. It is one
  // expert's width, so the copies cost little, and no gather is needed.
  bool replicated_shared_expert = false;
  // Gated DeltaNet mixers: key heads [delta_k_head_begin, + n_delta_k_heads) and the
  // n_delta_v_heads value heads reading them (delta_value_head_runs), whose columns of ssm_out
  // are kept whole on every rank when they are not whole quantization blocks (as above).
  int32_t delta_k_head_begin = 0, n_delta_k_heads = 0;
  int32_t n_delta_v_heads = 0;
  bool replicated_delta_out = false;
};

// Contiguous index ranges [begin, begin + count).
struct IndexRun {
  int64_t begin = 0, count = 0;
};

// The global value heads of a rank's DeltaNet slice, in its local order. With value head h
// reading key head h % n_k_heads (qwen35), the heads reading the rank's key heads are, for each
// j < n_v_heads / n_k_heads, the run j * n_k_heads + [delta_k_head_begin, + n_delta_k_heads):
// local head j * n_delta_k_heads + i is global head j * n_k_heads + delta_k_head_begin + i, and
// so reads local key head i. With grouped value heads (qwen3next: h reads h / (n_v / n_k)) they
// are one run. Either way the slice runs the mixer unchanged. d: the model's (whole) config.
std::vector<IndexRun> delta_value_head_runs(const DeltaNetConfig& d, const ShardRanges& r);

// The ranges of `shard` for a model of config `c`, or an error naming what does not split
// (heads, dense FFN width or experts not divisible by the ranks, a whole-vector Q/K norm,
// DeltaNet key heads not divisible by the ranks). attn_block_cols, down_block_cols,
// shared_down_block_cols, delta_out_block_cols: the widest quantization block (in columns) of the
// attention output, dense FFN down, shared-expert down and DeltaNet ssm_out matrices, whose
// columns are split.
Result<ShardRanges> shard_ranges(const ModelConfig& c, const TensorShard& shard,
                                 int64_t attn_block_cols, int64_t down_block_cols,
                                 int64_t shared_down_block_cols, int64_t delta_out_block_cols = 1);

// The layers [begin, begin + count) of pipeline stage `stage` of n_stages: contiguous, stage s
// from n_layer * s / n_stages (so when they do not divide evenly, the stages after the first
// take the extra layers: the first also reads the embeddings); an error when there are fewer
// layers than stages.
struct LayerRange {
  int32_t begin = 0, count = 0;
};
Result<LayerRange> stage_layers(int32_t n_layer, int32_t stage, int32_t n_stages);

// The most layers any of the n_stages stages holds (what a per-rank KV budget must allow for,
// since every stage keeps the same blocks); n_layer when the layers do not split.
int32_t most_stage_layers(int32_t n_layer, int32_t n_stages);

// Vocabulary rows of rank r: multiples of 16 (the packed layouts' row groups) but the last.
int64_t shard_vocab_begin(int64_t n_vocab, const TensorShard& shard);

// The config one rank's forward pass runs with: its heads, KV heads, DeltaNet heads, dense FFN
// and shared-expert widths and its stage's layers (the vocabulary stays whole: token ids and logits
// are the model's).
ModelConfig shard_config(const ModelConfig& c, const ShardRanges& r);

}  // namespace vela
