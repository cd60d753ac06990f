#pragma once
// The GGUF tensor behind each weight matrix a forward pass multiplies in its layers, keyed by the
// data pointer the pass reads (WeightMatrix::data, after any repacking), so that an
// ActivationObserver can tell which tensor, and which expert or head of a stacked tensor, an
// input belongs to.
// A fused tensor is listed once, under its first row view (attn_qkv under wq, a fused ffn_up
// under w_gate); the pass multiplies all of its views by the same input in one call, so their
// other views are left out and an observer counts the input once. The output head and the token
// embedding are not layer products and are not listed.
// Thread-safety: a pure function of the (immutable) model.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace vela {

struct NamedWeight {
  const void* data = nullptr;  // the matrix's data as the pass reads it
  std::string name;            // GGUF tensor name, e.g. "blk.3.ffn_down_exps.weight"
  int32_t index = 0;           // which matrix of a stacked tensor (expert or head), else 0
  int32_t n_stack = 1;         // matrices in the tensor: n_expert, n_head, or 1
  bool routed = false;         // a routed expert: its inputs are only the tokens routed to it
  int64_t n_cols = 0;          // input width of one matrix
};

// Every multiplied matrix of the layers this model holds (a pipeline stage's layers keep their
// model-wide numbers; a tensor-parallel rank's experts and heads their model-wide indices).
std::vector<NamedWeight> named_weights(const Model& model);

}  // namespace vela
