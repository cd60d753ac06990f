#pragma once
// Gathers an importance matrix from a forward pass: as its ActivationObserver, sums per weight
// tensor and input column the squares of the inputs, and counts the rows summed (per expert for
// routed experts). What it collects is what the reference engine's imatrix tool collects by
// default: every product of a layer's weight tensor (names "blk.*", named_weights.h) — attention
// and DeltaNet projections, dense and shared-expert FFN matrices, routers, each routed expert's
// own tokens — and not the output head or the token embedding (a row lookup). As the reference,
// it skips products of fewer than 16 rows, except routed experts' (whose row counts vary).
// Thread-safety: not synchronised; the forward pass calls observe() from the thread running it.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/activation_observer.h"
#include "model/model.h"
#include "tools_support/imatrix_file.h"

namespace vela {

class ImatrixCollector final : public ActivationObserver {
 public:
  // Products of fewer rows than this are not collected (the reference's rule for plain products).
  static constexpr int64_t kMinRows = 16;

  explicit ImatrixCollector(const Model& model);

  // x: [n_tokens, w.n_cols]; matrices that are not a layer's weight tensor are ignored.
  void observe(const WeightMatrix& w, const float* x, int64_t n_tokens) override;

  // The sums so far, for the tensors that received any rows, with the caller's dataset and
  // chunk details filled in. A stack of matrices that are not routed experts (latent
  // attention's per-head attn_k_b/attn_v_b) keeps one count, as the reference writes it.
  ImportanceMatrix result(std::vector<std::string> datasets, int32_t chunk_count,
                          int32_t chunk_size) const;

 private:
  struct Entry {
    std::string name;
    int64_t n_cols = 0;
    int32_t n_mat = 1;
    bool routed = false;
    std::vector<double> sum2;     // [n_mat, n_cols]
    std::vector<int64_t> counts;  // [n_mat]
  };
  struct Slot {
    size_t entry;   // index into entries_
    int32_t index;  // matrix within the entry
  };

  std::vector<Entry> entries_;
  std::unordered_map<const void*, Slot> slots_;  // by the matrix's data pointer
};

}  // namespace vela
