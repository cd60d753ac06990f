// A mixture of experts larger than its memory cgroup's limit runs with the experts left in the
// file mapping: `vela generate` in a cgroup v1 memory controller whose limit is below the model
// file (but above the other weights and the KV cache) gives the tokens an unconstrained run
// gives (the same as a repacked run's, up to a near tie between the two kernels' sums),
// `--moe-experts auto` picks the mapping there by itself, and `repacked` is refused with a
// message naming the mapped choice instead of ending in the OOM killer.
// Needs root and a writable /sys/fs/cgroup/memory (skips otherwise).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/expert_loading.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr const char* kMemoryRoot = "/sys/fs/cgroup/memory";

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return bool(out);
}

std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// A memory cgroup of the test's own, removed (with its statistics) when destroyed; the processes
// it held have exited by then.
class MemoryCgroup {
 public:
  // The cgroup, or nullopt with `why` set when the controller is absent or not writable.
  static std::optional<MemoryCgroup> create(uint64_t limit_bytes, std::string& why) {
    const std::string path =
        std::string(kMemoryRoot) + "/vela_moe_test_" + std::to_string(getpid());
    if (access(kMemoryRoot, W_OK) != 0 || mkdir(path.c_str(), 0755) != 0) {
      why = std::string("cannot create a cgroup v1 memory cgroup under ") + kMemoryRoot +
            " (needs root and a writable memory controller)";
      return std::nullopt;
    }
    MemoryCgroup group(path);
    if (!write_text(path + "/memory.limit_in_bytes", std::to_string(limit_bytes)) ||
        read_number(path + "/memory.limit_in_bytes").value_or(0) > limit_bytes) {
      why = "cannot set " + path + "/memory.limit_in_bytes";
      return std::nullopt;
    }
    return group;
  }
  MemoryCgroup(MemoryCgroup&& other) noexcept : path_(std::move(other.path_)) {
    other.path_.clear();
  }
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;
  ~MemoryCgroup() {
    if (!path_.empty()) rmdir(path_.c_str());
  }

  // A shell command that runs `command` inside this cgroup (the shell moves itself in, then
  // execs it).
  std::string inside(const std::string& command) const {
    return "sh -c 'echo $$ > " + path_ + "/cgroup.procs && exec " + command + "'";
  }
  std::optional<uint64_t> stat(const std::string& file) const {
    return read_number(path_ + "/" + file);
  }

 private:
  explicit MemoryCgroup(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct GeneratedToken {
  int id = 0;
  double margin = 0;  // logprob of the most likely token minus the second's
  bool operator==(const GeneratedToken& other) const { return id == other.id; }
};

// What `vela generate --logprobs 2` printed to stderr for each token ("[token ID logprob L |
// A LA | B LB]"; greedy: A is ID).
std::vector<GeneratedToken> generated_tokens(const std::string& err) {
  std::vector<GeneratedToken> tokens;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    int id = 0, first = 0, second = 0;
    double logprob = 0, first_lp = 0, second_lp = 0;
    if (std::sscanf(line.c_str(), "[token %d logprob %lf | %d %lf | %d %lf", &id, &logprob, &first,
                    &first_lp, &second, &second_lp) == 6)
      tokens.push_back({id, first_lp - second_lp});
  }
  return tokens;
}

// The mapped experts run on the row-major kernels, the repacked ones on the interleaved int8
// kernels, whose sums differ in the last bits: on a random-weight model (nearly flat logits)
// greedy decoding may part at a near tie. Equal up to the end, or up to a step where `want`
// had its top two within 0.02.
void expect_same_until_a_near_tie(const std::vector<GeneratedToken>& got,
                                  const std::vector<GeneratedToken>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].id == want[i].id) continue;
    EXPECT_LT(want[i].margin, 0.02) << "token " << i << ": " << got[i].id << " instead of "
                                    << want[i].id << ", which led by " << want[i].margin;
    return;
  }
}

// Drops the file's pages from the page cache, so the cgroup's run reads (and is charged for)
// them itself rather than finding them already cached on another cgroup's account.
void evict_page_cache(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << path;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

TEST(MoeExpertsCli, MappedExpertsRunInACgroupSmallerThanTheModel) {
  if (access(kMemoryRoot, W_OK) != 0)
    GTEST_SKIP() << kMemoryRoot << " is not writable (needs root and the cgroup v1 memory "
                 << "controller)";
  const std::string vela = VELA_BINARY;
  const std::string model = test::unique_temp_path("mixtral-experts-Q8_0.gguf");
  const test::CommandResult made = test::run_command(
      vela + " synth -o " + model + " --shape mixtral-experts --type Q8_0 --vocab-from builtin -q");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  uint64_t file_bytes = 0, expert_bytes = 0;
  {
    auto file = GgufFile::open(model);
    ASSERT_TRUE(file) << file.message();
    file_bytes = file->file_size();
    expert_bytes = routed_expert_bytes(*file);
  }
  // Below the file, well above the ~13 MB of other weights, the small KV cache and the
  // process's own memory.
  const uint64_t limit = file_bytes / 2;
  ASSERT_GT(expert_bytes, file_bytes - limit + (64u << 20)) << "the shape's experts are too small";

  std::string why;
  auto cgroup = MemoryCgroup::create(limit, why);
  if (!cgroup) GTEST_SKIP() << why;

  const std::string generate = vela + " generate -m " + model +
                               " -p \"Hello there\" -n 12 --temp 0 --logprobs 2 -t 2 -c 256";
  const test::CommandResult reference = test::run_command(generate + " --moe-experts repacked");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::vector<GeneratedToken> want = generated_tokens(reference.err);
  ASSERT_EQ(want.size(), 12u) << reference.err;
  // The same kernels outside the cgroup: what the constrained runs must give exactly.
  const test::CommandResult unconstrained = test::run_command(generate + " --moe-experts mapped");
  ASSERT_EQ(unconstrained.exit_code, 0) << unconstrained.err;
  const std::vector<GeneratedToken> mapped_want = generated_tokens(unconstrained.err);
  expect_same_until_a_near_tie(mapped_want, want);

  evict_page_cache(model);
  const test::CommandResult mapped =
      test::run_command(cgroup->inside(generate + " --moe-experts mapped"));
  ASSERT_EQ(mapped.exit_code, 0) << mapped.err;
  EXPECT_EQ(generated_tokens(mapped.err), mapped_want) << mapped.err;
  EXPECT_EQ(mapped.out, unconstrained.out);
  // The run used the cgroup's memory up to its limit: the experts' pages were dropped and read
  // again, never all resident at once.
  EXPECT_LE(cgroup->stat("memory.max_usage_in_bytes").value_or(0), limit);
  EXPECT_GT(cgroup->stat("memory.failcnt").value_or(0), 0u)
      << "the run never reached the limit: the test does not exercise paging";

  // auto reads the cgroup's limit and maps the experts by itself, saying so.
  evict_page_cache(model);
  const test::CommandResult automatic = test::run_command(cgroup->inside(generate));
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_NE(automatic.err.find("--moe-experts auto: experts mapped"), std::string::npos)
      << automatic.err;
  EXPECT_EQ(generated_tokens(automatic.err), mapped_want) << automatic.err;

  // Outside the cgroup the model fits, and auto repacks.
  const test::CommandResult outside = test::run_command(generate);
  ASSERT_EQ(outside.exit_code, 0) << outside.err;
  EXPECT_NE(outside.err.find("--moe-experts auto: experts repacked"), std::string::npos)
      << outside.err;

  // Repacked experts cannot fit: the memory guard refuses before anything is repacked.
  const test::CommandResult refused =
      test::run_command(cgroup->inside(generate + " --moe-experts repacked"));
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("more than the cgroup's memory limit"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--moe-experts mapped keeps the experts"), std::string::npos)
      << refused.err;
  std::remove(model.c_str());
}

TEST(MoeExpertsCli, AnUnknownModeIsAUsageError) {
  const test::CommandResult r =
      test::run_command(std::string(VELA_BINARY) + " generate -m x.gguf -p hi --moe-experts mmap");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--moe-experts"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mapped, repacked or auto"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vela
