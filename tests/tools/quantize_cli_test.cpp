// `vela quantize` as a user runs it: --help lists every mix and --imatrix; each mix the common
// quantizer made of tiny-llama-256 (and tiny-openai-moe's MXFP4_MOE) is remade from the F32 file,
// with the shared importance matrix where the common quantizer used one, holding the same tensor
// types and file type, or is refused in one line naming the types this build cannot make yet; a
// mix that needs an importance matrix without one, an importance matrix lacking a tensor or made
// for another model, and an unreadable one are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "support/run_command.h"
#include "support/shared_data.h"
#include "tools_support/imatrix_file.h"

namespace vela {
namespace {

test::CommandResult run(const std::string& args) {
  return test::run_command(std::string(VELA_BINARY) + " quantize " + args);
}

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

std::string shared(const std::string& relative) {
  return quote(test::shared_path(relative).string());
}

size_t count_lines(const std::string& s) {
  return size_t(std::count(s.begin(), s.end(), '\n'));
}

TEST(QuantizeCli, HelpListsTheMixes) {
  const auto help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* name : {"Q2_K_S", "Q3_K_L", "IQ4_XS", "IQ3_M", "IQ2_M", "IQ1_S", "TQ1_0",
                           "MXFP4_MOE", "Q4_K_M", "--imatrix", "[imatrix]"})
    EXPECT_NE(help.out.find(name), std::string::npos) << name << "\n" << help.out;
}

TEST(QuantizeCli, RemakesTheCommonQuantizersMixes) {
  VELA_REQUIRE_SHARED();
  std::vector<std::pair<std::string, std::string>> cases;  // (F32 model, mix)
  for (const char* mix : {"Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S",
                          "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"})
    cases.emplace_back("tiny-llama-256", mix);
  cases.emplace_back("tiny-openai-moe", "MXFP4_MOE");
  for (const auto& [model, mix] : cases) {
    auto theirs =
        GgufFile::open(test::shared_path("models/" + model + "-" + mix + ".gguf").string());
    ASSERT_TRUE(theirs.ok()) << mix;
    const bool imatrix = theirs->find("quantize.imatrix.file") != nullptr;
    const std::string out = test::unique_temp_path("vela_qcli_" + mix + ".gguf");
    const auto r = run(
        "-q -t 2 " + shared("models/" + model + "-F32.gguf") + " " + quote(out) + " " + mix +
        (imatrix ? " --imatrix " + shared("imatrix/tiny-llama-256.imatrix.gguf") : std::string()));
    if (r.exit_code != 0) {
      // Only a type without a quantizer in this build may stop it, said in one line.
      EXPECT_EQ(r.exit_code, 1) << mix << ": " << r.err;
      EXPECT_EQ(count_lines(r.err), 1u) << mix << ": " << r.err;
      EXPECT_NE(r.err.find("cannot make yet"), std::string::npos) << mix << ": " << r.err;
      EXPECT_FALSE(std::filesystem::exists(out)) << mix;
      std::printf("[ note     ] %s not made: %s", mix.c_str(), r.err.c_str());
      continue;
    }
    auto ours = GgufFile::open(out);
    ASSERT_TRUE(ours.ok()) << mix;
    EXPECT_EQ(ours->get_uint("general.file_type")->value_or(0),
              theirs->get_uint("general.file_type")->value_or(1))
        << mix;
    EXPECT_EQ(ours->find("quantize.imatrix.file") != nullptr, imatrix) << mix;
    ASSERT_EQ(ours->tensors().size(), theirs->tensors().size()) << mix;
    for (const GgufTensorInfo& t : theirs->tensors()) {
      const GgufTensorInfo* o = ours->find_tensor(t.name);
      ASSERT_NE(o, nullptr) << mix << " " << t.name;
      EXPECT_EQ(ggml_type_name(o->type), ggml_type_name(t.type)) << mix << " " << t.name;
    }
    std::filesystem::remove(out);
  }
}

TEST(QuantizeCli, ImportanceMatrixErrors) {
  VELA_REQUIRE_SHARED();
  const std::string f32 = shared("models/tiny-llama-256-F32.gguf");
  const std::string out = test::unique_temp_path("vela_qcli_never.gguf");

  // Q2_K_S's Q2_K tensors need one: why, and how to make one.
  auto r = run("-q " + f32 + " " + quote(out) + " Q2_K_S");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("needs an importance matrix"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("vela imatrix -m"), std::string::npos) << r.err;

  r = run("-q " + f32 + " " + quote(out) + " Q2_K_S --imatrix /nonexistent/x.imatrix");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;

  auto m = read_imatrix(test::shared_path("imatrix/tiny-llama-256.imatrix.gguf").string());
  ASSERT_TRUE(m.ok()) << m.message();
  ImportanceMatrix trimmed = *m;
  trimmed.entries.erase("blk.3.ffn_gate.weight");
  const std::string trimmed_path = test::unique_temp_path("vela_qcli_trimmed.imatrix.gguf");
  ASSERT_TRUE(write_imatrix(trimmed, trimmed_path).ok());
  r = run("-q " + f32 + " " + quote(out) + " Q2_K_S --imatrix " + quote(trimmed_path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("'blk.3.ffn_gate.weight'"), std::string::npos) << r.err;

  // A mix that needs none goes on and says which tensors went without.
  const std::string q4 = test::unique_temp_path("vela_qcli_trimmed_q4km.gguf");
  r = run(f32 + " " + quote(q4) + " Q4_K_M --imatrix " + quote(trimmed_path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 tensors had no entry in the importance matrix"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("blk.3.ffn_gate.weight"), std::string::npos) << r.err;
  std::filesystem::remove(q4);

  ImportanceMatrix other = *m;  // as if made for a model 128 wide
  ImatrixEntry& e = other.entries.at("blk.0.attn_q.weight");
  e.n_cols = 128;
  e.sum2.assign(128, 1.0f);
  e.update_importance();
  const std::string other_path = test::unique_temp_path("vela_qcli_other.imatrix.gguf");
  ASSERT_TRUE(write_imatrix(other, other_path).ok());
  r = run("-q " + f32 + " " + quote(out) + " Q2_K_S --imatrix " + quote(other_path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("'blk.0.attn_q.weight' has 128 values per row"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace vela
