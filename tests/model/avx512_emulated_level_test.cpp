// Part of model_avx512_emulated_tests only (tests/model/CMakeLists.txt): the forward pass there
// runs the emulated AVX-512 kernels, so the reference-logit and batch tests beside it check that
// level; were the real kernel library linked instead, this fails rather than letting them run the
// AVX2 level unnoticed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu_features.h"

namespace vela {
namespace {

TEST(Avx512EmulatedLevel, ForwardPassSelectsTheEmulatedKernels) {
  if (!cpu_features().avx2) GTEST_SKIP() << "CPU without AVX2: the emulated library needs it";
  EXPECT_EQ(supported_kernel_isas().back(), KernelIsa::kAvx512);
  if (std::getenv("VELA_ISA") == nullptr) EXPECT_EQ(selected_kernel_isa(), KernelIsa::kAvx512);
  EXPECT_NE(describe_cpu().find("emulated"), std::string::npos) << describe_cpu();
}

}  // namespace
}  // namespace vela
