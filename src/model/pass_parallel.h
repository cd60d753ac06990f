#pragma once
// How the forward pass spreads its loops over the thread pool: element-wise ranges, and the
// matmul splits (kernels/matmul.h) of one or more products.
// Thread-safety: as ThreadPool::parallel_for.
#include <algorithm>
#include <cstdint>

#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace vela {

// fn(begin, end) over [0, n) in ranges spread over the pool, or fn(0, n) inline when
// n * item_cost (roughly, in multiply-adds) is below min_work.
template <class Fn>
void parallel_ranges(ThreadPool& pool, int64_t n, int64_t item_cost, int64_t min_work,
                     const Fn& fn) {
  const int32_t n_threads = pool.n_threads();
  if (n_threads == 1 || n < 2 || n * item_cost < min_work) {
    fn(int64_t(0), n);
    return;
  }
  const int64_t n_ranges = std::min<int64_t>(n, n_threads);
  const int64_t per = (n + n_ranges - 1) / n_ranges;
  pool.parallel_for((n + per - 1) / per,
                    [&](int64_t r, int32_t) { fn(r * per, std::min(n, (r + 1) * per)); });
}

// Splits the products added to `split` over the pool (min_parallel_work < 0: the default
// threshold) and runs them.
inline void run_matmul_split(MatmulSplit& split, ThreadPool& pool, int64_t min_parallel_work) {
  split.split(pool.n_threads(),
              min_parallel_work < 0 ? MatmulSplit::kMinParallelWork : min_parallel_work);
  if (split.parallel()) {
    pool.parallel_for(split.n_chunks(), [&](int64_t chunk, int32_t) { split.run_chunk(chunk); });
  } else {
    for (int64_t chunk = 0; chunk < split.n_chunks(); ++chunk) split.run_chunk(chunk);
  }
}

}  // namespace vela
