#pragma once
// Writes a random-weight GGUF model of a named shape (model_shape.h) in any supported type,
// with the tokenizer copied from another GGUF file, streamed tensor by tensor so an 8B model
// needs only a few tens of MiB of memory.
//
// Weights: matrices and biases are drawn from a normal-like distribution (mean 0, std
// `weight_std`, default 0.02, as the common initialisers use; an Irwin-Hall sum of four
// uniforms, bounded at ~3.5 sigma); every norm (Q/K, post and DeltaNet output norms included) and
// Gemma 4's layer_output_scale is 1, and its rope_freqs turns the shape's rotated pairs (1e30 on
// the others, as the converter writes it). With unit-RMS inputs every projection then has
// activations of order std * sqrt(n_in) ~ 1, so a deep stack stays finite. A Gated DeltaNet's
// convolution taps have std 1/sqrt(taps) (the convolution keeps its input's scale) and its decay
// scales ssm_a are -exp(A_log) with A_log uniform in [0, ln 16) (the reference initialisation's
// range; the state decays, never grows). Each row's values depend only on (seed, tensor index,
// row), never on the type or thread count: the same seed gives the same model in every type.
//
// Vocabulary: every `tokenizer.*` key is copied from the vocab file and its token count sets
// n_vocab, overriding the shape's nominal size; pass the matching vocabulary to reproduce a
// checkpoint's exact size, or set pad_vocab to append unused tokens ("[PAD<id>]", type UNUSED)
// up to the shape's size (e.g. a Llama-3-sized embedding with the Llama-2 tokenizer).
// Thread-safety: synthesize_model() uses its own worker threads and shares no state.
#include <cstdint>
#include <functional>
#include <string>

#include "tools_support/model_shape.h"
#include "tools_support/quant_recipe.h"
#include "util/result.h"

namespace vela {

struct SynthOptions {
  std::string output_path;
  ModelShape shape;
  QuantTarget target;
  std::string vocab_path;  // GGUF file whose tokenizer.* metadata is copied
  uint64_t seed = 0;
  bool pure = false;       // every 2-D tensor in the target type (no output/mix rules)
  bool pad_vocab = false;  // pad the vocabulary with unused tokens up to shape.n_vocab
  int n_threads = 0;       // 0 = all hardware threads
  float weight_std = 0.02f;
  // Called before each tensor is written: (index, count, name, type).
  std::function<void(size_t, size_t, const std::string&, GgmlType)> on_tensor;
};

struct SynthSummary {
  int32_t n_vocab = 0;
  uint64_t n_params = 0;  // elements of every tensor
  uint64_t file_bytes = 0;
  size_t n_tensors = 0;
};

Result<SynthSummary> synthesize_model(const SynthOptions& options);

// The f32 values synth writes for rows [row_begin, row_end) of tensor number `tensor_index`
// with row length n_cols (exposed for tests): dst is [row_end - row_begin, n_cols].
void synth_rows(uint64_t seed, size_t tensor_index, TensorKind kind, float weight_std,
                int64_t n_cols, int64_t row_begin, int64_t row_end, float* dst);

}  // namespace vela
