#pragma once
// Which type each tensor of a model gets for a requested file type, following the rules of the
// common GGUF quantizer so files made here look like the ones people download. The names and
// the per-mix rules live in quant_mixes.h (whole models: plan_tensor_types()); this header keeps
// the parsed target and a per-tensor shortcut for generated models:
//  * tensors the common quantizer never quantizes (1-D tensors, norms, MoE routers,
//    ffn_gate_inp.weight, convolution taps ssm_conv1d.weight, names not ending in "weight") stay
//    F32;
//  * for quantized targets, output.weight (or token_embd.weight when the embeddings are tied)
//    gets Q6_K (Q5_K in the 1-2 bit IQ mixes), unless the target is Q8_0 (kept) or its rows do
//    not fit the target's blocks (Q8_0);
//  * the mixes (Q4_K_M, Q3_K_S, IQ2_M, ...) move some roles and layers to other types; e.g.
//    Q4_K_M / Q5_K_M put attn_v.weight and ffn_down.weight in Q6_K for the first and last eighth
//    of the layers and every third layer in between;
//  * a tensor whose row length is not a multiple of its type's block size falls back: Q4_K ->
//    Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ types -> IQ4_NL, Q2_K / Q3_K / TQ* -> Q4_0, anything
//    else (or still not fitting) -> F16.
// Plain Q4_K / Q5_K are vela's uniform types (only the output rule); "pure" skips the output
// and mix rules (every matrix but the routers in the target type, with fallback).
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
  bool k_mix = false;      // the name is a mix's, not a tensor type's (Q4_K_M, IQ2_M, ...)
  uint32_t file_type = 0;  // GGUF general.file_type (the common llama_ftype numbering)
  bool plain = false;      // vela's uniform Q4_K / Q5_K: only the output rule
};

// Accepts the names of quant_mixes() (any case): F32, F16, BF16, Q8_0, Q4_0 ... Q6_K, the K
// mixes Q2_K ... Q5_K_M, the IQ mixes, TQ1_0, TQ2_0 and MXFP4_MOE. Plain Q4_K / Q5_K are uniform
// (no mix), recorded as file types Q4_K_S / Q5_K_S.
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

// One tensor's type with the block index standing in for the mixes' counters (one attention V
// and one FFN tensor of each kind per block, as in a dense model without grouped-query or expert
// rules); whole files go through plan_tensor_types() (quant_mixes.h).
GgmlType choose_tensor_type(const QuantTarget& target, const TensorRole& role, bool pure = false);

// The block index in a name "blk.N.xxx", or -1.
int32_t layer_of_tensor(std::string_view name);

}  // namespace vela
