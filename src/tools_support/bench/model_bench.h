#pragma once
// Times a model's prompt processing (one sequence, its prompt in batches of up to n_batch tokens)
// and token generation (single-token decode steps), llama-bench style, directly on DecoderForward
// and a KvCache (no tokenizer, sampler or request loop in the measurement), from position 0 or
// after a context of n_depth tokens filled beforehand (llama-bench's -d: "tg128 @ d4096"). With a
// tensor- or pipeline-parallel group, the model is world rank 0's slice and every pass runs on all
// ranks (the caller sets the other ranks up with the geometry cache_config() and friends report).
// Thread-safety: a ModelBench owns its forward pass and cache; use it from one thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/model.h"
#include "tools_support/bench/roofline.h"
#include "util/result.h"

namespace vela::bench {

// What one token costs the model, for the roofline comparison.
struct ModelProfile {
  std::string name;       // general.name, else the file name
  std::string type_name;  // the file type ("Q4_K_M") or the blocks' dominant tensor type
  uint64_t file_bytes = 0;
  uint64_t n_params = 0;             // elements of every tensor
  uint64_t block_matrix_params = 0;  // elements of the blocks' matrices (used by every token)
  uint64_t output_params = 0;        // elements of the output matrix (used per logits row)
  uint64_t output_bytes = 0;         // bytes of the output matrix
  uint64_t decode_bytes = 0;         // weight bytes one decode step reads: block matrices + output
  // The cache a decode step reads beside the weights (the bench's f16 K/V): the K/V bytes of one
  // cached position over every attention layer (windowed layers counted as if global), and the
  // recurrent state of every DeltaNet layer.
  uint64_t kv_bytes_per_position = 0;
  uint64_t state_bytes = 0;
  bool int8_activations = false;  // dominant weight type multiplies int8-quantized activations
  bool bf16_weights = false;      // dominant weight type is BF16 (bf16 dot products)
};

// The arithmetic ceiling of the model's prompt processing: int8 peak for quantized weights, the
// bf16 peak for BF16 ones where their kernel is the bf16 dot instruction (r: whether the CPU has
// one, bf16_flops > 0), else the fp32 peak.
CeilingKind prompt_ceiling(const ModelProfile& p, const Roofline& r);

// A mixture of experts' active share counts the whole model's experts (a tensor-parallel
// slice holds some of them, and its ranks share the chosen ones).
ModelProfile profile_model(const Model& model, const std::string& path, uint64_t file_bytes);

// What one rank of a split model computes and reads per token, from world rank 0's slice
// (`rank0`: the slice's own profile): its stage's block matrices scaled to every layer (the
// layers are alike, and a token passes through every stage in turn), and its slice of the output
// head (the whole head's 1/tensor_size where rank 0's stage has none). Without a split, `rank0`.
ModelProfile per_rank_profile(const ModelProfile& rank0, const ModelProfile& whole,
                              int32_t rank0_layers, int32_t whole_layers, int32_t tensor_size);

// FLOPs of a prompt of n_prompt tokens computed in ceil(n_prompt / n_batch) passes, each
// returning one row of logits: 2 x (block matrix params x tokens + output params x passes).
// Attention's own products are left out (small next to the weights at these lengths).
double prompt_flops(const ModelProfile& p, int32_t n_prompt, int32_t n_batch);

// Bytes n_gen decode steps read after n_depth tokens of context: each step the weights and the
// recurrent state, and the K/V of every position it attends (its own included).
double generation_bytes(const ModelProfile& p, int32_t n_depth, int32_t n_gen);

// Whether this build's DecoderForward takes a thread count (ForwardOptions::n_threads); when it
// does not, every run is single-threaded whatever n_threads says.
bool forward_supports_threads();

class ModelBench {
 public:
  // Sized for prompts of up to max_prompt tokens in batches of n_batch, and max_gen decode steps,
  // after contexts of up to max_depth tokens. `group`: world rank 0's tensor- or
  // pipeline-parallel group (`model` is its slice); null in one process.
  ModelBench(std::shared_ptr<const Model> model, int32_t n_threads, int32_t n_batch,
             int32_t max_prompt, int32_t max_gen, uint64_t seed = 1234,
             std::shared_ptr<TensorParallel> group = nullptr, int32_t max_depth = 0);

  // One pass of n_batch tokens, untimed: it touches every weight and the pass buffers at the
  // size the prompt runs use, so page faults and cold caches stay out of the timings (with a
  // one-token warm-up, the first pp512 run of an F16 model measured 8% slower than the rest).
  Status warmup();
  // Makes the runs that follow start after a context of n_depth tokens (0: from position 0),
  // computing that context now, untimed, in passes of n_batch. A depth not below the one filled
  // last extends that context (recomputing what runs wrote past it) rather than refilling it.
  // A recurrent model's state at the depth is kept in a second state slot and copied back
  // before each run, outside its timing (a state covers exactly the tokens it has seen).
  Status set_depth(int32_t n_depth);
  int32_t depth() const { return depth_; }
  // Seconds to process n_prompt tokens after the context (batches of n_batch, logits of the
  // last).
  Result<double> run_prompt(int32_t n_prompt);
  // Seconds for n_gen decode steps of one token each after the context; with step_seconds, each
  // step's seconds are appended to it as well.
  Result<double> run_generation(int32_t n_gen, std::vector<double>* step_seconds = nullptr);

  // The logits of the last run's last token: [n_vocab].
  const std::vector<float>& logits() const { return logits_; }

  // The geometry the other ranks of a group need: tokens per pass, context and this rank's KV.
  int32_t n_batch() const { return n_batch_; }
  int32_t max_context() const { return int32_t(tokens_.size()); }
  const KvCacheConfig& cache_config() const { return cache_->config(); }

 private:
  Status pass(int32_t first_position, int32_t n_tokens);
  // Copies every state layer's state from slot `from` to slot `to` (recurrent models).
  void copy_state(int32_t from, int32_t to);
  // Before a run: a recurrent model's state back at the context's end (from slot 1).
  void restore_context();

  std::shared_ptr<const Model> model_;
  int32_t n_batch_;
  std::unique_ptr<DecoderForward> forward_;
  std::unique_ptr<KvCache> cache_;
  std::vector<int32_t> tokens_;       // [max_context] random token ids
  std::vector<int32_t> positions_;    // [max_context] 0, 1, 2, ...
  std::vector<int32_t> seq_index_;    // [n_batch] all 0
  std::vector<int32_t> block_table_;  // [n_blocks] 0, 1, 2, ...
  std::vector<float> logits_;         // [n_vocab]
  int32_t max_depth_ = 0;
  int32_t depth_ = 0;   // the context runs start after
  int32_t filled_ = 0;  // positions [0, filled_) hold the context computed last
};

}  // namespace vela::bench
