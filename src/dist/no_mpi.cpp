// The tensor-parallel entry points of a build without MPI: each says that this build has none.
#include "dist/tensor_group.h"
#include "kernels/cpu_features.h"

namespace vela::dist {

namespace {
Error no_mpi() {
  return make_error(
      "this build of vela has no MPI (install libopenmpi-dev and rebuild) "
      "for --tensor-parallel-size or --pipeline-parallel-size");
}
}  // namespace

bool available() {
  return false;
}
bool group_failed() {
  return false;
}
Result<std::shared_ptr<TensorParallel>> join(ParallelSizes, const std::string&) {
  return no_mpi();
}
Result<std::shared_ptr<TensorParallel>> join_spawned() {
  return no_mpi();
}
int32_t threads_per_rank(int32_t n_threads) {
  return n_threads > 0 ? n_threads : cpu_features().physical_cores;
}
Status start_workers(TensorParallel&, const ShardSetup&) {
  return no_mpi();
}
int serve_as_worker(const std::shared_ptr<TensorParallel>&) {
  return 1;
}

}  // namespace vela::dist
