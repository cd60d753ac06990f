// The delta rule step of every level this CPU has against the scalar reference: eight tokens in a
// row on one state (so rounding differences carry from token to token, as in decode), for head
// sizes with and without a SIMD tail. Outputs and the state agree within 1e-5 of their largest
// magnitude (the levels sum each 16- or 128-term dot product in lanes, not in element order), and
// nothing past the state is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/delta_rule_kernels.h"

namespace vela::kernels {
namespace {

std::vector<float> normalized(std::mt19937& rng, int32_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  float ss = 0.0f;
  for (float& v : x) v = normal(rng), ss += v * v;
  for (float& v : x) v /= std::sqrt(ss);
  return x;
}

float max_abs(const std::vector<float>& x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

TEST(DeltaRuleKernels, StepMatchesReferenceOverTokens) {
  const DeltaRuleKernels& ref = delta_rule_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const DeltaRuleKernels& kern = delta_rule_kernels(isa);
    for (const auto& [d_k, d_v] :
         {std::pair{128, 128}, std::pair{64, 32}, std::pair{16, 8}, std::pair{8, 5},
          std::pair{40, 24}, std::pair{130, 7}, std::pair{1, 3}}) {
      SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " d_k=" + std::to_string(d_k) +
                   " d_v=" + std::to_string(d_v));
      std::mt19937 rng(uint32_t(d_k * 1000 + d_v));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::uniform_real_distribution<float> unit(0.05f, 0.999f);
      const size_t n_state = size_t(d_k) * size_t(d_v);
      std::vector<float> want(n_state + 1), got(n_state + 1);
      for (size_t i = 0; i < n_state; ++i) want[i] = got[i] = normal(rng);
      want[n_state] = got[n_state] = 12345.0f;
      const float scale = 1.0f / std::sqrt(float(d_k));
      for (int t = 0; t < 8; ++t) {
        const std::vector<float> q = normalized(rng, d_k), k = normalized(rng, d_k);
        std::vector<float> v(static_cast<size_t>(d_v));
        for (float& x : v) x = normal(rng);
        const float decay = unit(rng), beta = unit(rng);
        std::vector<float> out_want(static_cast<size_t>(d_v)),
            out_got(static_cast<size_t>(d_v) + 1, -7.0f);
        ref.step(want.data(), q.data(), k.data(), v.data(), decay, beta, scale, out_want.data(),
                 d_k, d_v);
        kern.step(got.data(), q.data(), k.data(), v.data(), decay, beta, scale, out_got.data(), d_k,
                  d_v);
        const float out_bound = 1e-5f * max_abs(out_want, out_want.size()) + 1e-30f;
        for (int32_t j = 0; j < d_v; ++j)
          ASSERT_NEAR(out_got[size_t(j)], out_want[size_t(j)], out_bound) << "token " << t;
        ASSERT_EQ(out_got[size_t(d_v)], -7.0f) << "wrote past the output";
        const float state_bound = 1e-5f * max_abs(want, n_state);
        for (size_t i = 0; i < n_state; ++i)
          ASSERT_NEAR(got[i], want[i], state_bound) << "token " << t << " element " << i;
        ASSERT_EQ(got[n_state], 12345.0f) << "wrote past the state";
      }
    }
  }
}

// A run of tokens gives what the level's step gives token by token, bit for bit (outputs, saved
// states and the final state: a verification must decode as plain steps would), with saves after
// some tokens only, at aligned and unaligned addresses, for head sizes the registers hold and
// others.
TEST(DeltaRuleKernels, StepsEqualTheStepTokenByToken) {
  for (KernelIsa isa : supported_kernel_isas()) {
    const DeltaRuleKernels& kern = delta_rule_kernels(isa);
    for (const auto& [d_k, d_v] : {std::pair{128, 128}, std::pair{64, 16}, std::pair{32, 8},
                                   std::pair{40, 24}, std::pair{130, 7}})
      for (const int32_t n_tokens : {1, 3, kMaxDeltaRuleRun})
        for (const int64_t save_at : {int64_t(0), int64_t(5)}) {
          SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " d_k=" + std::to_string(d_k) +
                       " d_v=" + std::to_string(d_v) + " tokens=" + std::to_string(n_tokens) +
                       " save_at=" + std::to_string(save_at));
          std::mt19937 rng(uint32_t(d_k * 31 + d_v + n_tokens));
          std::normal_distribution<float> normal(0.0f, 1.0f);
          std::uniform_real_distribution<float> unit(0.05f, 0.999f);
          const size_t n_state = size_t(d_k) * size_t(d_v);
          std::vector<float> want(n_state), got(n_state);
          for (size_t i = 0; i < n_state; ++i) want[i] = got[i] = normal(rng);
          const float scale = 1.0f / std::sqrt(float(d_k));
          std::vector<std::vector<float>> q, k, v, out_want, out_got, saved_want, saved_got;
          std::vector<DeltaRuleToken> run;
          for (int32_t t = 0; t < n_tokens; ++t) {
            q.push_back(normalized(rng, d_k));
            k.push_back(normalized(rng, d_k));
            v.emplace_back(size_t(d_v));
            for (float& x : v.back()) x = normal(rng);
            out_want.emplace_back(size_t(d_v));
            out_got.emplace_back(size_t(d_v));
            saved_want.emplace_back(n_state + size_t(save_at), 0.0f);
            saved_got.emplace_back(n_state + size_t(save_at) + 1, -9.0f);
          }
          for (int32_t t = 0; t < n_tokens; ++t) {
            const float decay = unit(rng), beta = unit(rng);
            const bool save = t % 2 == 0;
            kern.step(want.data(), q[size_t(t)].data(), k[size_t(t)].data(), v[size_t(t)].data(),
                      decay, beta, scale, out_want[size_t(t)].data(), d_k, d_v);
            if (save) std::copy(want.begin(), want.end(), saved_want[size_t(t)].begin());
            run.push_back({q[size_t(t)].data(), k[size_t(t)].data(), v[size_t(t)].data(), decay,
                           beta, out_got[size_t(t)].data(),
                           save ? saved_got[size_t(t)].data() + save_at : nullptr});
          }
          kern.steps(got.data(), run.data(), n_tokens, scale, d_k, d_v);
          ASSERT_EQ(got, want);
          for (int32_t t = 0; t < n_tokens; ++t) {
            EXPECT_EQ(out_got[size_t(t)], out_want[size_t(t)]) << t;
            const std::vector<float>& s = saved_got[size_t(t)];
            if (t % 2 == 0)
              EXPECT_TRUE(
                  std::equal(s.begin() + save_at, s.end() - 1, saved_want[size_t(t)].begin()))
                  << t;
            EXPECT_EQ(s.back(), -9.0f) << "written past the saved state, token " << t;
          }
        }
  }
}

// A state saved to a checkpoint is the state, bit for bit, whatever the alignment of either end
// and the length (streaming stores cover the aligned middle), and nothing around it is written.
TEST(DeltaRuleKernels, SaveStateCopiesExactly) {
  for (KernelIsa isa : supported_kernel_isas()) {
    const DeltaRuleKernels& kern = delta_rule_kernels(isa);
    for (const int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(33), int64_t(16384)})
      for (const int64_t dst_at : {int64_t(0), int64_t(3), int64_t(16)}) {
        SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " n=" + std::to_string(n) + " at " +
                     std::to_string(dst_at));
        std::vector<float> src(size_t(n) + 1), dst(size_t(n + dst_at) + 32, -3.0f);
        for (size_t i = 0; i < src.size(); ++i) src[i] = float(i) * 0.37f - 5.0f;
        kern.save_state(dst.data() + dst_at, src.data() + 1, n);
        for (int64_t i = 0; i < int64_t(dst.size()); ++i) {
          const float want = i >= dst_at && i < dst_at + n ? src[size_t(i - dst_at + 1)] : -3.0f;
          ASSERT_EQ(dst[size_t(i)], want) << i;
        }
      }
  }
}

}  // namespace
}  // namespace vela::kernels
