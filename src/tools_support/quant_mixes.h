#pragma once
// The file types ("mixes") of the common GGUF quantizer: for each, the GGUF general.file_type
// number and the type every tensor gets, decided as that quantizer decides so that a file made
// here holds the same tensor types as the one people download:
//  * tensors it never quantizes keep their type: fewer than 2 dimensions, names not ending in
//    "weight", norms, MoE routers, convolution taps and a few small per-architecture tensors;
//  * the output matrix (the token embedding when tied) gets Q6_K, Q5_K in the 1-2 bit IQ mixes,
//    Q8_0 in MXFP4_MOE or when its rows do not fit the base type's blocks;
//  * each mix then picks per role (attention V / K / Q / output, FFN down / gate / up), layer
//    position, grouped-query factor, expert count and whether an importance matrix is given;
//  * a type whose blocks do not divide the row length falls back: IQ types -> IQ4_NL, Q2_K /
//    Q3_K / TQ* -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 if still no fit (the
//    common quantizer stops instead on the types it has no fallback for; here they get F16).
// The rules count attention-V and FFN tensors in the common quantizer's order (by layer, then
// by name), so whole models go through plan_tensor_types().
// Plain value types and pure functions; no thread-safety concerns.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quant/ggml_type.h"
#include "tools_support/quant_recipe.h"
#include "util/result.h"

namespace vela {

class GgufFile;

struct QuantMix {
  const char* name;       // as the user types it (any case)
  uint32_t file_type;     // GGUF general.file_type
  GgmlType base;          // the type of the tensors no rule singles out
  bool plain;             // vela's uniform Q4_K / Q5_K: only the output rule applies
  bool needs_importance;  // the common quantizer refuses it without an importance matrix
  const char* summary;    // what it holds, for help
};

// Every name parse_quant_target() accepts, in the order help lists them.
std::span<const QuantMix> quant_mixes();

// What the rules read of a model besides its tensors.
struct MixModel {
  std::string arch;       // general.architecture
  int32_t n_layer = 0;    // <arch>.block_count
  int32_t n_head = 0;     // of layer 0
  int32_t n_head_kv = 0;  // of layer 0 (0: unknown)
  int32_t n_expert = 0;   // <arch>.expert_count
  bool has_imatrix = false;
};

// The model's architecture, block count, heads (layer 0 of per-layer arrays) and experts; the
// block count falls back to the highest "blk.N." + 1 when the key is missing.
MixModel mix_model_of(const GgufFile& file);

struct MixTensor {
  std::string_view name;
  int64_t ne[4] = {1, 1, 1, 1};
  int32_t n_dims = 2;
  GgmlType type = GgmlType::F32;  // its type now: kept where the rules do not quantize it
};

// Where a tensor stands among the model's tensors, as the rules count them; mix_tensor_type()
// advances it.
struct MixPosition {
  int32_t attn_v = 0;    // attention-V-like tensors (attn_v, attn_qkv, attn_kv_b) passed
  int32_t n_attn_v = 0;  // in the whole model
  int32_t ffn_down = 0, ffn_gate = 0, ffn_up = 0;  // FFN tensors of each kind passed
  bool tied_embeddings = false;                    // no output.weight: token_embd serves
};

// The type of one tensor; an error only where the common quantizer stops (an expert model's FFN
// tensor without a valid block index).
Result<GgmlType> mix_tensor_type(const QuantTarget& target, const MixModel& model,
                                 const MixTensor& tensor, MixPosition& position, bool pure);

// Every tensor's type, in the order given (the rules walk them in the common quantizer's order).
Result<std::vector<GgmlType>> plan_tensor_types(const QuantTarget& target, const MixModel& model,
                                                std::span<const MixTensor> tensors, bool pure);

// Whether making `type` for this tensor takes an importance matrix: the common quantizer's rule
// (IQ1/IQ2/IQ3_XXS tensors, and Q2_K ones in a Q2_K_S file; never the embedding or output) or
// vela's quantizer of that type asking for one (needs_importance()).
bool tensor_needs_importance(const QuantTarget& target, std::string_view name, GgmlType type);

}  // namespace vela
