// vela quantize against the common quantizer: tiny-llama-256-F32 quantized here to Q8_0, Q4_0,
// Q6_K and Q4_K_M has exactly the shared files' tensor types; tensors of the deterministic
// legacy types (Q8_0, Q4_0) are byte-identical; K-type tensors decode within the format's error
// and about as close to F32 as the common quantizer's; the result loads and generates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "support/shared_data.h"
#include "tools_support/quantize_model.h"
#include "vela/llm.h"

namespace vela {
namespace {

std::string quantize(const std::string& input, const std::string& type,
                     const std::string& tag = "") {
  QuantizeOptions o;
  o.input_path = input;
  o.output_path = vela::test::unique_temp_path("vela_quantize_" + type + tag + ".gguf");
  o.target = *parse_quant_target(type);
  o.n_threads = 2;
  auto r = quantize_model(o);
  EXPECT_TRUE(r.ok()) << r.message();
  if (r.ok()) {
    EXPECT_EQ(std::filesystem::file_size(o.output_path), r->output_bytes);
  }
  return o.output_path;
}

std::vector<float> decode(const GgufTensorInfo& t) {
  std::vector<float> v(size_t(t.n_elements()));
  dequantize_row(t.ggml_type(), t.data, v.data(), t.n_elements());
  return v;
}

double relative_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i)
    e += double(x[i] - y[i]) * (x[i] - y[i]), s += double(x[i]) * x[i];
  return std::sqrt(e / s);
}

// Relative RMS error bounds of the K types on normal data (see tests/quant/error_bounds.h for
// the derivation: rounding noise step/sqrt(12) of the sub-block range, ~25% headroom).
double k_bound(GgmlType t) {
  return t == GgmlType::Q4_K   ? 0.095
         : t == GgmlType::Q5_K ? 0.047
         : t == GgmlType::Q6_K ? 0.023
                               : -1;
}

TEST(QuantizeModel, MatchesTheCommonQuantizer) {
  VELA_REQUIRE_SHARED();
  const std::string f32_path = test::shared_path("models/tiny-llama-256-F32.gguf").string();
  auto f32 = GgufFile::open(f32_path);
  ASSERT_TRUE(f32.ok());
  for (const std::string variant : {"Q8_0", "Q4_0", "Q6_K", "Q4_K_M"}) {
    const std::string ours_path = quantize(f32_path, variant);
    auto ours = GgufFile::open(ours_path);
    auto theirs =
        GgufFile::open(test::shared_path("models/tiny-llama-256-" + variant + ".gguf").string());
    ASSERT_TRUE(ours.ok() && theirs.ok()) << variant;
    EXPECT_EQ(*ours->get_uint("general.file_type"), *theirs->get_uint("general.file_type"))
        << variant;
    EXPECT_EQ(*ours->get_uint("general.quantization_version"), std::optional<uint64_t>(2));
    // Everything else of the metadata is carried over.
    for (const auto& [key, value] : f32->metadata())
      if (key != "general.file_type") {
        EXPECT_NE(ours->find(key), nullptr) << key;
      }
    ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
    for (const GgufTensorInfo& t : theirs->tensors()) {
      const GgufTensorInfo* o = ours->find_tensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      ASSERT_EQ(o->type, t.type) << variant << " " << t.name;
      ASSERT_EQ(o->n_bytes, t.n_bytes);
      const GgmlType type = t.ggml_type();
      if (type == GgmlType::F32 || type == GgmlType::Q8_0 || type == GgmlType::Q4_0) {
        EXPECT_EQ(std::memcmp(o->data, t.data, t.n_bytes), 0)
            << variant << " " << t.name << " differs";
        continue;
      }
      const auto ref = decode(*f32->find_tensor(t.name));
      const double ours_err = relative_rms(ref, decode(*o)),
                   theirs_err = relative_rms(ref, decode(t));
      EXPECT_LT(ours_err, k_bound(type)) << variant << " " << t.name;
      // Our scale search may differ from theirs, but not be much worse.
      EXPECT_LT(ours_err, theirs_err * 1.25)
          << variant << " " << t.name << " theirs " << theirs_err;
    }

    LLMConfig config;
    config.model_path = ours_path;
    auto llm = LLM::load(config);
    ASSERT_TRUE(llm.ok()) << llm.message();
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 6;
    p.ignore_eos = true;
    auto out = (*llm)->generate({"Once upon a time"}, p);
    ASSERT_TRUE(out.ok()) << out.message();
    EXPECT_EQ(out->front().outputs.at(0).token_ids.size(), 6u);
    std::filesystem::remove(ours_path);
  }
}

TEST(QuantizeModel, HalfPrecisionInputsAndPureMode) {
  VELA_REQUIRE_SHARED();
  // F16 -> Q8_0: the F16 values requantize like any float input.
  const std::string path =
      quantize(test::shared_path("models/tiny-llama-256-F16.gguf").string(), "Q8_0", "_f16");
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok());
  for (const GgufTensorInfo& t : g->tensors())
    EXPECT_EQ(t.ggml_type(), t.n_dims == 1 ? GgmlType::F32 : GgmlType::Q8_0) << t.name;

  QuantizeOptions o;
  o.input_path = test::shared_path("models/tiny-llama-256-BF16.gguf").string();
  o.output_path = vela::test::unique_temp_path("vela_quantize_pure.gguf");
  o.target = *parse_quant_target("Q4_0");
  o.pure = true;
  ASSERT_TRUE(quantize_model(o).ok());
  auto pure = GgufFile::open(o.output_path);
  ASSERT_TRUE(pure.ok());
  EXPECT_EQ(pure->find_tensor("output.weight")->ggml_type(), GgmlType::Q4_0);
}

TEST(QuantizeModel, RefusesToRequantize) {
  VELA_REQUIRE_SHARED();
  QuantizeOptions o;
  o.input_path = test::shared_path("models/tiny-llama-256-Q4_0.gguf").string();
  o.output_path = vela::test::unique_temp_path("vela_quantize_requant.gguf");
  o.target = *parse_quant_target("Q8_0");
  auto r = quantize_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("only F32, F16 and BF16"), std::string::npos) << r.message();
  EXPECT_FALSE(std::filesystem::exists(o.output_path));

  o.input_path = "/nonexistent/model.gguf";
  r = quantize_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/nonexistent/model.gguf"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace vela
