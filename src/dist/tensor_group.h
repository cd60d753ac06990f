#pragma once
// The process's parallel group over MPI: every rank of `mpirun -np T*P` joins it (P pipeline
// stages of T tensor-parallel ranks), world rank 0 runs the engine, the others serve its forward
// passes (serve_as_worker) on their own slice of the model. A build without MPI has the same
// functions, which return an error saying so. Thread-safety: join() from one thread; a group is
// then used by one thread at a time (as TensorParallel says).
#include <cstdint>
#include <memory>
#include <string>

#include "dist/rank_identity.h"
#include "kv/kv_cache.h"
#include "model/tensor_parallel.h"
#include "util/result.h"

namespace vela::dist {

// What rank 0 tells the other ranks to build: the same model file, forward-pass limits and KV
// cache geometry (their KV holds only their heads of their stage's layers, in the same block
// ids).
struct ShardSetup {
  std::string model_path;
  bool repack_weights = true;
  bool repack_experts = true;  // false: experts stay in the file mapping (--moe-experts mapped)
  int32_t max_batch_tokens = 0;
  int32_t max_logits = 0;
  int32_t max_context = 0;
  int32_t n_threads = 0;            // 0 = this host's physical cores over its ranks
  int32_t micro_batch_tokens = 64;  // ForwardOptions::micro_batch_tokens
  KvCacheConfig kv;
  RankIdentity expected;  // rank 0's (filled in by start_workers)
};

struct ParallelSizes {
  int32_t tensor = 1;    // ranks a stage's layers are split over
  int32_t pipeline = 1;  // stages of contiguous layers
  int32_t ranks() const { return tensor * pipeline; }
};

// Whether this build has MPI.
bool available();
// True once this process's group has failed (a watchdog fired): the job is about to stop, and
// the server's /health answers 503 for the seconds until it does. Safe from any thread.
bool group_failed();
// This process's group of sizes.ranks() ranks, initialising MPI on the first call (each further
// call returns the same group, or an error for other sizes). Under mpirun the group is mpirun's
// ranks (exactly that many); without a launcher, given worker_program (the vela binary), this
// process spawns the other ranks on this host (`worker_program tensor-parallel-worker`) and is
// world rank 0. An error when neither applies or the build has no MPI.
Result<std::shared_ptr<TensorParallel>> join(ParallelSizes sizes,
                                             const std::string& worker_program = {});
// A tensor-parallel group of `size` ranks, one stage.
inline Result<std::shared_ptr<TensorParallel>> join(int32_t size,
                                                    const std::string& worker_program = {}) {
  return join(ParallelSizes{size, 1}, worker_program);
}
// A spawned worker's side of join: the group of the rank 0 that started this process.
Result<std::shared_ptr<TensorParallel>> join_spawned();
// Forward-pass threads of one rank for n_threads (0: the host's physical cores shared by the
// group's ranks on it).
int32_t threads_per_rank(int32_t n_threads);

// Rank 0: sends the setup and waits for every rank to load its slice; an error names the first
// rank that could not, or that runs another build or has another model file at the path (the
// rank, its host and what differs). A rank on another kernel level is said on stderr.
Status start_workers(TensorParallel& group, const ShardSetup& setup);
// Any other rank: waits for rank 0's setup, loads its slice and serves passes until rank 0
// closes the group. Returns the process exit code (0 when rank 0 closed the group).
int serve_as_worker(const std::shared_ptr<TensorParallel>& group);

}  // namespace vela::dist
