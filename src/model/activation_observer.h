#pragma once
// A hook into the forward pass that sees the input of each weight-matrix product, for tools that
// gather activation statistics (`vela imatrix`). The pass holds a null pointer by default, so a
// normal pass pays one branch per product.
// Thread-safety: the pass calls observe() on the thread that runs it, one call at a time, between
// its parallel loops; an observer shared by several passes must synchronise itself.
#include <cstdint>

#include "model/model_weights.h"

namespace vela {

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;

  // The pass is about to multiply w by x: [n_tokens, w.n_cols], one row per token (for a routed
  // expert, only the rows of the tokens routed to it). w is the matrix as the pass reads it; its
  // data pointer tells which tensor (and which expert or head of a stacked one) it is
  // (named_weights.h). x is only valid during the call.
  virtual void observe(const WeightMatrix& w, const float* x, int64_t n_tokens) = 0;
};

}  // namespace vela
