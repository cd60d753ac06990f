#include "model/projector.h"

#include <algorithm>

#include "model/pass_parallel.h"

namespace vela {

Projector::Projector(ThreadPool& pool, int64_t min_work, int64_t min_parallel_work)
    : pool_(pool), min_work_(min_work), min_parallel_work_(min_parallel_work) {}

void Projector::reserve(const WeightMatrix& m, int64_t rows) {
  const size_t need = matmul_scratch_bytes(m.type, m.n_cols, rows, m.layout);
  if (need <= scratch_bytes_) return;
  scratch_bytes_ = need;
  for (MatmulScratch& s : scratch_) s.reserve(need);
}

void Projector::project(const float* x, int64_t n_tokens, std::initializer_list<Output> outs) {
  if (observer_ != nullptr)
    for (const Output& o : outs) observer_->observe(*o.w, x, n_tokens);
  split_.clear();
  QuantizedActivations acts[3];
  int n_acts = 0;
  for (const Output& o : outs) {
    const WeightMatrix& w = *o.w;
    QuantizedActivations act =
        prepare_activations(w.type, x, w.n_cols, n_tokens, scratch_[n_acts], w.layout);
    int a = 0;
    while (a < n_acts && acts[a].type != act.type) ++a;
    if (a == n_acts) {  // a new activation type: convert x once for it
      acts[n_acts++] = act;
      MatmulScratch& scratch = scratch_[a];
      parallel_ranges(pool_, n_tokens, w.n_cols * 4, min_work_, [&](int64_t begin, int64_t end) {
        convert_activations(act, x, w.n_cols, begin, end, scratch);
      });
    }
    split_.add(w.type, w.data, w.n_rows, w.n_cols, acts[a], n_tokens, o.y, w.layout);
  }
  run_matmul_split(split_, pool_, min_parallel_work_);
}

}  // namespace vela
