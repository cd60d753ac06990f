#pragma once
// Which type each tensor of a model gets for a requested file type, following the rules of the
// common GGUF quantizer so files made here look like the ones people download:
//  * 1-D tensors (norms, biases, ssm_a) and MoE routers (ffn_gate_inp.weight) stay F32, as do a
//    Gated DeltaNet's convolution taps (ssm_conv1d.weight).
//  * 3-D expert tensors (ffn_*_exps.weight) are quantized by rows of ne[0] like 2-D matrices.
//  * For quantized targets, output.weight (or token_embd.weight when the embeddings are tied)
//    gets Q6_K, unless the target is Q8_0 (kept) or its rows do not fit the target's blocks
//    (Q8_0). token_embd.weight of an untied model gets the target type.
//  * The mixes Q4_K_M / Q5_K_M put attn_v.weight and ffn_down.weight (MoE blocks:
//    ffn_down_exps.weight) in Q6_K for the first and last eighth of the layers and every third
//    layer in between; everything else is Q4_K / Q5_K.
//  * A tensor whose row length is not a multiple of its type's block size falls back:
//    Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, anything else (or still not fitting) -> F16.
// "Pure" skips the output and mix rules (every matrix but the routers in the target type, with
// fallback).
// Plain value types and pure functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>

#include "quant/ggml_type.h"
#include "util/result.h"

namespace vela {

struct QuantTarget {
  std::string name;  // as the user spells it, upper case: "Q4_K_M"
  GgmlType base = GgmlType::F32;
  bool k_mix = false;      // Q4_K_M / Q5_K_M rules
  uint32_t file_type = 0;  // GGUF general.file_type (the common llama_ftype numbering)
};

// Accepts F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q4_K_M, Q5_K_M
// (any case). Plain Q4_K / Q5_K are uniform (no mix), recorded as file types Q4_K_S / Q5_K_S.
Result<QuantTarget> parse_quant_target(std::string_view name);
std::string quant_target_names();  // for help and error messages

struct TensorRole {
  std::string_view name;   // GGUF tensor name, e.g. "blk.3.ffn_down.weight"
  int64_t row_length = 0;  // ne[0]
  int32_t n_dims = 2;      // 3 for expert tensors
  int32_t layer = -1;      // block index, -1 outside the blocks
  int32_t n_layer = 0;
  bool has_output = true;  // whether the model has its own output.weight
};

GgmlType choose_tensor_type(const QuantTarget& target, const TensorRole& role, bool pure = false);

// The block index in a name "blk.N.xxx", or -1.
int32_t layer_of_tensor(std::string_view name);

}  // namespace vela
