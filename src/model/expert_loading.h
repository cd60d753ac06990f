#pragma once
// The routed experts' tensors in the two layouts GGUF files hold them in: stacked, one 3-D
// tensor per matrix kind and layer (blk.N.ffn_{gate,up,down}_exps.weight, ne = {cols, rows,
// n_expert}), or, in older Mixtral conversions, one 2-D tensor per expert
// (blk.N.ffn_{gate,up,down}.E.weight). Both load as per-expert views into the file mapping.
// Free functions; no state.
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/model_weights.h"
#include "util/result.h"

namespace vela {

// Bytes of the file's routed-expert matrices, in either layout: the part of the weights that
// stays out of resident memory when the experts are left in the file mapping.
uint64_t routed_expert_bytes(const GgufFile& g);

// Whether the layer with tensor-name prefix `prefix` ("blk.3.") stores its experts one tensor
// each (its expert 0's gate, `blk.3.ffn_gate.0.weight`, is present).
bool has_per_expert_tensors(const GgufFile& g, const std::string& prefix);

// That layer's experts [n_expert] from the per-expert tensors, each checked for presence and
// shape: gate and up [n_ff, n_embd], down [n_embd, n_ff]. An error names the tensor, and for a
// file with both layouts (or only part of the per-expert tensors) says how to convert it.
Result<std::vector<ExpertWeights>> load_per_expert_tensors(const GgufFile& g,
                                                           const std::string& prefix,
                                                           int64_t n_expert, int64_t n_ff,
                                                           int64_t n_embd);

}  // namespace vela
