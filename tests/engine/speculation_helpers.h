#pragma once
// Helpers of the speculative-decoding engine tests: shared models, requests run to completion,
// and the chi-square homogeneity test the sampling tests use.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "support/shared_data.h"

namespace vela::test {

struct SpecModel {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline SpecModel load_model(const std::string& name) {
  SpecModel m;
  auto model = Model::load(test::shared_path("models/" + name + ".gguf").string());
  EXPECT_TRUE(model.ok()) << model.message();
  m.model = *model;
  auto tok = Tokenizer::from_gguf(m.model->gguf());
  EXPECT_TRUE(tok.ok()) << tok.message();
  m.tokenizer = std::make_unique<Tokenizer>(std::move(*tok));
  return m;
}

inline SamplingParams params(int32_t max_tokens, float temperature = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Submits every prompt at once and steps until all finish; returns each one's output.
inline std::vector<CompletionOutput> generate_all(Engine& engine,
                                                  const std::vector<std::vector<int32_t>>& prompts,
                                                  const std::vector<SamplingParams>& per_prompt) {
  std::vector<CompletionOutput> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = engine.add_request(prompts[i], per_prompt[i % per_prompt.size()], 0,
                                 [&out, i](const RequestEvent& e) {
                                   if (e.finished) out[i] = *e.output;
                                 });
    EXPECT_TRUE(id.ok()) << id.message();
  }
  while (engine.has_unfinished()) {
    const Status st = engine.step();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st) break;
  }
  return out;
}

inline void expect_pool_whole(const Engine& engine) {
  EXPECT_EQ(engine.kv_usage().used, 0);
  EXPECT_EQ(engine.check_kv_invariants(), "");
}

inline std::vector<std::vector<int32_t>> ids(const std::vector<CompletionOutput>& outs) {
  std::vector<std::vector<int32_t>> r;
  for (const auto& o : outs) r.push_back(o.token_ids);
  return r;
}

// Two-sample chi-square (homogeneity) of two histograms over the same bins; bins whose pooled
// count is under 10 are merged. Sets df.
inline double homogeneity_chi_square(const std::vector<int>& a, const std::vector<int>& b,
                                     int& df) {
  const double na = std::accumulate(a.begin(), a.end(), 0.0);
  const double nb = std::accumulate(b.begin(), b.end(), 0.0);
  std::vector<std::pair<double, double>> bins;
  double small_a = 0, small_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] + b[i] < 10) {
      small_a += a[i];
      small_b += b[i];
    } else {
      bins.push_back({double(a[i]), double(b[i])});
    }
  }
  if (small_a + small_b > 0) bins.push_back({small_a, small_b});
  double stat = 0;
  for (const auto& [x, y] : bins) {
    const double total = x + y;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    stat += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
  }
  df = int(bins.size()) - 1;
  return stat;
}

// Upper 0.001 quantile of chi-square (Wilson–Hilferty).
inline double critical_0_001(int df) {
  const double z = 3.0902, v = 2.0 / (9.0 * df);
  return df * std::pow(1 - v + z * std::sqrt(v), 3);
}

// Writes `bytes` to a file of that name in the temporary directory; returns its path.
inline std::string write_temp(const std::vector<uint8_t>& bytes, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path.string();
}

}  // namespace vela::test
