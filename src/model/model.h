#pragma once
// A loaded Llama-family model: the mapped GGUF file, its hyper-parameters and weight views.
// Thread-safety: immutable after load(); share it freely between threads.
#include <memory>
#include <string>

#include "io/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/result.h"

namespace vela {

struct ModelLoadOptions {
  // Repack matrices into the layout the selected int8 kernels prefer (model_weights.h); off
  // keeps every matrix in the mapping as the file has it (as does VELA_REPACK=0).
  bool repack_weights = true;
  // Also the mixture-of-experts matrices (as VELA_REPACK_EXPERTS=0 turns off; the engine sets it
  // from its moe_experts option): their packed kernels decode and prefill faster than row-major
  // ones read from the file mapping's 4 KiB pages; off, experts no token chooses are not even
  // paged in, and experts larger than memory run, paged in on use.
  bool repack_experts = true;
  // A tensor-parallel rank keeps only its slice of the weights, and its config() has that
  // slice's heads and FFN width (tensor_shard.h).
  TensorShard shard;
};

class Model {
 public:
  static Result<std::shared_ptr<const Model>> load(const std::string& path,
                                                   const ModelLoadOptions& options = {});
  static Result<std::shared_ptr<const Model>> from_gguf(std::shared_ptr<const GgufFile> gguf,
                                                        const ModelLoadOptions& options = {});
  // The multi-token-prediction ("NextN") block stored after `target`'s decoder layers, as a
  // model of one layer (mtp_block_config: config().mtp_block is set) that DecoderForward runs
  // with a hidden state per token (ForwardBatch::input_hidden). Always whole, in one process,
  // even when `target` is a tensor- or pipeline-parallel shard (options.shard is not read). It
  // shares target's token embeddings and output head where the file has no nextn copies and
  // target is not a shard (then reads them from the file), and keeps target alive. Errors: no
  // block in the file, more than one, or a missing or mis-shaped block tensor (named).
  static Result<std::shared_ptr<const Model>> mtp_block(std::shared_ptr<const Model> target,
                                                        const ModelLoadOptions& options = {});
  // The EAGLE-3 draft head in `head` (llama.cpp's eagle3 GGUF) for `target`, as a model of one
  // layer (eagle3_head_config: config().eagle3 is set, config().n_vocab is the target's) that
  // DecoderForward runs with a row of ForwardBatch::input_hidden per token: 3 target layers'
  // inputs (input_is_target_features) or the head's own previous output. Its logits rows are
  // over the target's vocabulary (-infinity for ids d2t does not reach); its hidden rows are
  // the layer's output before output_norm. Always whole, in one process (options.shard is not
  // read). It shares target's token_embd and output head where the head has none (reading them
  // whole from target's file when target is a shard), and keeps target alive. Errors name the
  // bad key or tensor: extract_layers not 3 of target's layers, target_hidden_size not target's
  // n_embd, d2t not I64 or off the vocabulary, no output.weight for a vocabulary of its own, a
  // missing or mis-shaped tensor.
  static Result<std::shared_ptr<const Model>> eagle3_head(std::shared_ptr<const GgufFile> head,
                                                          std::shared_ptr<const Model> target,
                                                          const ModelLoadOptions& options = {});

  const GgufFile& gguf() const { return *gguf_; }
  // The config this process's forward pass runs with: a tensor- or pipeline-parallel rank's
  // slice of the model (its heads, FFN width, stage's layers).
  const ModelConfig& config() const { return config_; }
  // The whole model's, as the file describes it.
  const ModelConfig& whole_config() const { return whole_config_; }
  const ModelWeights& weights() const { return weights_; }
  const TensorShard& shard() const { return shard_; }
  // An MTP block's decoder or an EAGLE-3 head's target (whose matrices it may share); null for
  // any other model.
  const std::shared_ptr<const Model>& head_target() const { return target_; }

 private:
  std::shared_ptr<const GgufFile> gguf_;  // owns the mapping the weights point into
  // An MTP block's decoder or an EAGLE-3 head's target, kept for its shared matrices.
  std::shared_ptr<const Model> target_;
  ModelConfig config_;
  ModelConfig whole_config_;
  ModelWeights weights_;
  TensorShard shard_;
};

}  // namespace vela
