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

  const GgufFile& gguf() const { return *gguf_; }
  // The config this process's forward pass runs with: a tensor- or pipeline-parallel rank's
  // slice of the model (its heads, FFN width, stage's layers).
  const ModelConfig& config() const { return config_; }
  // The whole model's, as the file describes it.
  const ModelConfig& whole_config() const { return whole_config_; }
  const ModelWeights& weights() const { return weights_; }
  const TensorShard& shard() const { return shard_; }

 private:
  std::shared_ptr<const GgufFile> gguf_;  // owns the mapping the weights point into
  ModelConfig config_;
  ModelConfig whole_config_;
  ModelWeights weights_;
  TensorShard shard_;
};

}  // namespace vela
