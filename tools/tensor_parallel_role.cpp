#include "tensor_parallel_role.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "dist/tensor_group.h"

namespace vela::cli {

namespace {

// The value of `--flag N` or `--flag=N` in argv: 1 when absent or malformed (the command's own
// parser reports a malformed value).
long size_flag(int argc, char** argv, std::string_view flag) {
  const char* value = nullptr;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == flag && i + 1 < argc) value = argv[i + 1];
    if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag && arg[flag.size()] == '=')
      value = argv[i] + flag.size() + 1;
  }
  if (value == nullptr) return 1;
  char* end = nullptr;
  const long size = std::strtol(value, &end, 10);
  return end == value || *end != '\0' || size < 1 || size > 256 ? 1 : size;
}

}  // namespace

std::optional<int> join_tensor_parallel(int argc, char** argv,
                                        std::shared_ptr<TensorParallel>& group) {
  const dist::ParallelSizes sizes{int32_t(size_flag(argc, argv, "--tensor-parallel-size")),
                                  int32_t(size_flag(argc, argv, "--pipeline-parallel-size"))};
  if (sizes.ranks() <= 1) return std::nullopt;
  // The spawned workers run this same binary (by its real path: the MPI daemon that starts them
  // has its own /proc/self).
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  auto joined = dist::join(sizes, self);
  if (!joined) {
    std::fprintf(stderr, "vela: %s\n", joined.message().c_str());
    return 2;
  }
  group = std::move(*joined);
  if (group->world_rank() == 0) return std::nullopt;
  return serve_worker_rank(group);
}

int serve_worker_rank(std::shared_ptr<TensorParallel>& group) {
  // mpirun forwards SIGTERM and SIGINT to every rank: rank 0 drains its requests and then closes
  // the group, which is what ends this rank.
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  const int code = dist::serve_as_worker(group);
  group.reset();
  return code;
}

int run_spawned_worker() {
  auto joined = dist::join_spawned();
  if (!joined) {
    std::fprintf(stderr, "vela: %s\n", joined.message().c_str());
    return 2;
  }
  return serve_worker_rank(*joined);
}

}  // namespace vela::cli
