// Files that store one tensor per expert (blk.N.ffn_gate.E.weight, as older Mixtral conversions
// do) load as the stacked layout does: the shared tiny Mixtral files rewritten that way give the
// same logits, with the experts repacked or left in the file mapping, and malformed files are
// clear errors.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/expert_loading.h"
#include "model/model.h"
#include "sequence_runner.h"
#include "support/shared_data.h"

namespace vela {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct SplitOptions {
  std::string drop;           // a per-expert tensor left out
  bool keep_stacked = false;  // also keep the stacked tensors (both layouts in one file)
};

// The file with each stacked expert tensor blk.N.ffn_X_exps.weight [cols, rows, n_expert] split
// into n_expert tensors blk.N.ffn_X.E.weight [cols, rows].
std::vector<uint8_t> split_experts(const GgufFile& src, const SplitOptions& options = {}) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.add_value(key, value);
  constexpr std::string_view kSuffix = "_exps.weight";
  for (const GgufTensorInfo& t : src.tensors()) {
    const std::string name(t.name);
    const bool stacked = name.size() > kSuffix.size() &&
                         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
    if (!stacked || options.keep_stacked) {
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type(), ne, {t.data, t.data + t.n_bytes}).ok());
    }
    if (!stacked) continue;
    const std::string base = name.substr(0, name.size() - kSuffix.size());  // blk.N.ffn_X
    const uint64_t per_expert = t.n_bytes / uint64_t(t.ne[2]);
    for (int64_t e = 0; e < t.ne[2]; ++e) {
      const std::string split = base + "." + std::to_string(e) + ".weight";
      if (split == options.drop) continue;
      const std::vector<int64_t> ne = {t.ne[0], t.ne[1]};
      const uint8_t* data = t.data + uint64_t(e) * per_expert;
      EXPECT_TRUE(w.add_tensor(split, t.ggml_type(), ne, {data, data + per_expert}).ok());
    }
  }
  return w.to_bytes();
}

Result<std::shared_ptr<const Model>> load_image(const std::vector<uint8_t>& bytes,
                                                bool repack_experts) {
  auto image = GgufFile::from_bytes(bytes);
  if (!image) return image.error();
  ModelLoadOptions options;
  options.repack_experts = repack_experts;
  return Model::from_gguf(std::make_shared<const GgufFile>(std::move(*image)), options);
}

// Logits [n_tokens, n_vocab] of a prompt run in two chunks (a prefill, then decodes).
std::vector<float> run_logits(const std::shared_ptr<const Model>& model) {
  test::SequenceRunner runner(model, KvType::kF32);
  const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 311, 42, 7, 128, 64};
  std::vector<float> logits = runner.append(std::span(prompt).first(6));
  for (size_t i = 6; i < prompt.size(); ++i) {
    const std::vector<float> step = runner.append(std::span(prompt).subspan(i, 1));
    logits.insert(logits.end(), step.begin(), step.end());
  }
  return logits;
}

class PerExpertTensors : public testing::TestWithParam<std::string> {};

TEST_P(PerExpertTensors, GiveTheStackedFilesLogitsRepackedOrMapped) {
  VELA_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/" + GetParam()).string();
  const std::vector<uint8_t> stacked_bytes = read_bytes(path);
  ASSERT_FALSE(stacked_bytes.empty()) << path;
  auto stacked_file = GgufFile::from_bytes(stacked_bytes);
  ASSERT_TRUE(stacked_file) << stacked_file.message();
  const std::vector<uint8_t> split_bytes = split_experts(*stacked_file);
  auto split_file = GgufFile::from_bytes(split_bytes);
  ASSERT_TRUE(split_file) << split_file.message();
  ASSERT_NE(split_file->find_tensor("blk.0.ffn_down.3.weight"), nullptr);
  ASSERT_EQ(split_file->find_tensor("blk.0.ffn_down_exps.weight"), nullptr);
  // The experts are the same bytes in both layouts, and nearly all of the file.
  const uint64_t expert_bytes = routed_expert_bytes(*stacked_file);
  EXPECT_EQ(routed_expert_bytes(*split_file), expert_bytes);
  EXPECT_GT(expert_bytes, stacked_file->file_size() / 2);

  for (const bool repack_experts : {true, false}) {
    SCOPED_TRACE(repack_experts ? "experts repacked" : "experts in the mapping");
    auto stacked = load_image(stacked_bytes, repack_experts);
    ASSERT_TRUE(stacked) << stacked.message();
    auto split = load_image(split_bytes, repack_experts);
    ASSERT_TRUE(split) << split.message();
    const LayerWeights& l = (*split)->weights().layers[1];
    ASSERT_EQ(l.experts.size(), 4u);
    if (!repack_experts) {  // views of the per-expert tensors themselves
      const GgufTensorInfo* t = (*split)->gguf().find_tensor("blk.1.ffn_up.2.weight");
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(l.experts[2].up.data, t->data);
      EXPECT_EQ(l.experts[2].up.layout, WeightLayout::kRowMajor);
    }
    EXPECT_EQ(l.experts[2].up.layout, (*stacked)->weights().layers[1].experts[2].up.layout);
    const std::vector<float> want = run_logits(*stacked);
    const std::vector<float> got = run_logits(*split);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "logits differ from the stacked file's";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedMixtral, PerExpertTensors,
                         testing::Values("tiny-mixtral-F32.gguf", "tiny-mixtral-Q4_0.gguf"),
                         [](const auto& info) {
                           std::string name = info.param.substr(0, info.param.size() - 5);
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(PerExpertTensors, MissingExpertOrBothLayoutsAreClearErrors) {
  VELA_REQUIRE_SHARED();
  const std::vector<uint8_t> bytes =
      read_bytes(test::shared_path("models/tiny-mixtral-F32.gguf").string());
  ASSERT_FALSE(bytes.empty());
  auto file = GgufFile::from_bytes(bytes);
  ASSERT_TRUE(file) << file.message();

  auto missing = load_image(split_experts(*file, {.drop = "blk.2.ffn_down.3.weight"}), true);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("'blk.2.ffn_down.3.weight'"), std::string::npos)
      << missing.message();
  EXPECT_NE(missing.message().find("one tensor each"), std::string::npos) << missing.message();

  auto both = load_image(split_experts(*file, {.keep_stacked = true}), true);
  ASSERT_FALSE(both);
  EXPECT_NE(both.message().find("both per-expert tensors"), std::string::npos) << both.message();
  EXPECT_NE(both.message().find("ffn_gate_exps"), std::string::npos) << both.message();
}

}  // namespace
}  // namespace vela
