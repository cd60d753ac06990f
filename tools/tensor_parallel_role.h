#pragma once
// A command run as `mpirun -np N vela <command> --tensor-parallel-size T
// [--pipeline-parallel-size P]` (N = T * P) starts on every rank; rank 0 goes on with the
// command, the others serve its forward passes instead. Without mpirun the command spawns its
// N - 1 worker processes itself (`vela tensor-parallel-worker`).
// Thread-safety: call from main() before anything else starts.
#include <memory>
#include <optional>

#include "model/tensor_parallel.h"

namespace vela::cli {

inline constexpr const char* kTensorParallelHelp =
    "split each layer over N ranks (mpirun -np N, or spawned here; default 1)";
inline constexpr const char* kPipelineParallelHelp =
    "split the layers into N stages of consecutive layers, each on its own ranks (default 1)";

// Joins the group when argv asks for more than one rank. Returns the exit code when this process
// is done (a non-zero rank after serving, or a failed join); nullopt to run the command, with
// `group` held for its whole run (null without tensor parallelism).
std::optional<int> join_tensor_parallel(int argc, char** argv,
                                        std::shared_ptr<TensorParallel>& group);
// A non-zero rank's life, until rank 0 closes the group; returns the exit code.
int serve_worker_rank(std::shared_ptr<TensorParallel>& group);
// `vela tensor-parallel-worker`: a worker process rank 0 spawned (no mpirun).
int run_spawned_worker();

}  // namespace vela::cli
