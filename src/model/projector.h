#pragma once
// y = W x for one or more weight matrices of the same input, as the forward pass and its mixers
// multiply: the input converted once per activation type the matrices want (at most three
// kinds in one call), every product split over the thread pool in one loop.
// Thread-safety: one call at a time (it owns the converted activations); the pool may be shared.
#include <cstdint>
#include <initializer_list>

#include "kernels/matmul.h"
#include "model/activation_observer.h"
#include "model/model_weights.h"
#include "util/thread_pool.h"

namespace vela {

class Projector {
 public:
  struct Output {
    const WeightMatrix* w;
    float* y;  // [n_tokens, w->n_rows]
  };

  // min_work: conversions below this many multiply-adds stay on the calling thread;
  // min_parallel_work: the same for products (< 0: MatmulSplit's default).
  Projector(ThreadPool& pool, int64_t min_work, int64_t min_parallel_work);

  // Room for the largest converted activation of `m` over `rows` input rows.
  void reserve(const WeightMatrix& m, int64_t rows);

  // x: [n_tokens, n_cols] of every matrix in outs (at most MatmulSplit::kDefaultMaxParts).
  // Every matrix of every call, before its product, goes to the observer (null: none).
  void project(const float* x, int64_t n_tokens, std::initializer_list<Output> outs);

  // The pass's activation observer, which mixers multiplying outside project() also call.
  void set_observer(ActivationObserver* observer) { observer_ = observer; }
  ActivationObserver* observer() const { return observer_; }

 private:
  ThreadPool& pool_;
  int64_t min_work_;
  int64_t min_parallel_work_;
  size_t scratch_bytes_ = 0;
  MatmulScratch scratch_[3];  // converted activations, one per activation type of a call
  MatmulSplit split_;
  ActivationObserver* observer_ = nullptr;
};

}  // namespace vela
