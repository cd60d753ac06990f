// What ranks of a parallel job check of each other at set-up (src/dist/rank_identity.h,
// worker_setup.h): the same model file (size, header and tensor index) and build, else an error
// naming the rank, its host and what differs; another kernel level is a note, not an error.
#include "dist/rank_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "dist/worker_setup.h"
#include "io/gguf.h"
#include "support/shared_data.h"

namespace vela::dist {
namespace {

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

TEST(RankIdentity, SameFileMatchesAnotherFileOrBuildDoesNot) {
  VELA_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/tiny-llama-256-Q8_0.gguf").string();
  auto a = identify_rank(path);
  ASSERT_TRUE(a) << a.message();
  auto again = identify_rank(path);
  ASSERT_TRUE(again);
  EXPECT_EQ(identity_mismatch(*a, *again), "");
  EXPECT_FALSE(a->host.empty());
  EXPECT_FALSE(a->kernels.empty());
  EXPECT_GT(a->model_bytes, 0u);

  // Another quantization of the same model: another size.
  auto other = identify_rank(test::shared_path("models/tiny-llama-256-Q4_K_M.gguf").string());
  ASSERT_TRUE(other);
  EXPECT_NE(identity_mismatch(*a, *other).find("model file has"), std::string::npos);

  // The same size, one byte of the tensor index changed (a tensor's name): the hash differs.
  const std::string bytes = read_bytes(path);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file);
  const size_t at = bytes.rfind("blk.0.", file->data_offset());
  ASSERT_NE(at, std::string::npos);
  std::string changed = bytes;
  changed[at] = 'B';
  const auto changed_path = std::filesystem::temp_directory_path() / "vela-rank-identity.gguf";
  write_bytes(changed_path, changed);
  auto edited = identify_rank(changed_path.string());
  ASSERT_TRUE(edited) << edited.message();
  EXPECT_EQ(edited->model_bytes, a->model_bytes);
  EXPECT_NE(identity_mismatch(*a, *edited).find("header and tensor index differ"),
            std::string::npos);
  // A change in the tensor data alone is not looked at (the check reads the header only).
  changed = bytes;
  changed[bytes.size() - 1] ^= 1;
  write_bytes(changed_path, changed);
  auto data_only = identify_rank(changed_path.string());
  ASSERT_TRUE(data_only);
  EXPECT_EQ(identity_mismatch(*a, *data_only), "");
  std::filesystem::remove(changed_path);

  RankIdentity other_build = *a;
  other_build.build = "0.0.1+000000000000";
  EXPECT_NE(identity_mismatch(*a, other_build).find("the same build"), std::string::npos);

  auto missing = identify_rank("/nonexistent/model.gguf");
  EXPECT_FALSE(missing);
}

TEST(RankIdentity, RankZeroReadsEachReply) {
  RankIdentity expected{"host-a", "0.1.0+abc", "avx512", 1000, 42};
  std::string note;
  // A worker of this build that loaded its slice, on another host and kernel level.
  RankIdentity worker = expected;
  worker.host = "host-b";
  worker.kernels = "avx2";
  nlohmann::json reply = {{"identity", identity_to_json(worker)}};
  ASSERT_TRUE(check_worker_reply(1, reply.dump(), expected, note));
  EXPECT_NE(note.find("rank 1 (host host-b) runs the avx2 kernels"), std::string::npos) << note;
  worker.kernels = "avx512";
  reply = {{"identity", identity_to_json(worker)}};
  ASSERT_TRUE(check_worker_reply(1, reply.dump(), expected, note));
  EXPECT_EQ(note, "");

  // Another file: the rank, its host and what differs.
  worker.model_bytes = 999;
  reply = {{"identity", identity_to_json(worker)}, {"error", identity_mismatch(expected, worker)}};
  Status st = check_worker_reply(2, reply.dump(), expected, note);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("rank 2 (host host-b): its model file has 999 bytes, rank 0's has "
                              "1000"),
            std::string::npos)
      << st.message();
  // A rank that says nothing of itself runs a build from before the check.
  st = check_worker_reply(3, "", expected, note);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("rank 3 answered the setup without its identity"), std::string::npos);
  // One whose identity matches but whose check was skipped is still checked here.
  reply = {{"identity", identity_to_json(worker)}};
  st = check_worker_reply(1, reply.dump(), expected, note);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("rank 1 (host host-b): its model file has 999 bytes"),
            std::string::npos)
      << st.message();
  // A rank that could not open the file: the error, without an identity.
  reply = {{"error", "'/m.gguf': No such file or directory"}};
  st = check_worker_reply(1, reply.dump(), expected, note);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 1: '/m.gguf': No such file or directory");
  // A malformed identity.
  reply = {{"identity", {{"host", 3}}}};
  EXPECT_FALSE(check_worker_reply(1, reply.dump(), expected, note));
}

}  // namespace
}  // namespace vela::dist
