// Goodput objectives: parsing vLLM-style KEY:MS items, and which requests meet them.
#include <gtest/gtest.h>

#include "tools_support/bench/serve_slo.h"

namespace vela {
namespace {

TEST(ServeSlo, ParsesItemsSeparatelyOrInOneString) {
  ServeSlo slo;
  const std::vector<std::string> specs = {"ttft:3000,itl:150", "tpot:50 e2el:9000.5"};
  ASSERT_TRUE(add_goodput_objectives(specs, slo).ok());
  EXPECT_DOUBLE_EQ(*slo.ttft_s, 3.0);
  EXPECT_DOUBLE_EQ(*slo.itl_s, 0.15);
  EXPECT_DOUBLE_EQ(*slo.tpot_s, 0.05);
  EXPECT_DOUBLE_EQ(*slo.e2e_s, 9.0005);
  EXPECT_EQ(slo.describe(), "ttft <= 3000 ms, itl <= 150 ms, tpot <= 50 ms, e2el <= 9000.5 ms");
  EXPECT_FALSE(ServeSlo{}.any());
}

TEST(ServeSlo, BadItemsNameTheProblem) {
  for (const char* bad : {"ttft", "ttft:", "ttft:-5", "ttft:0", "ttft:12ms", "speed:10", ":10"}) {
    ServeSlo slo;
    const std::vector<std::string> specs = {bad};
    const Status st = add_goodput_objectives(specs, slo);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("--goodput"), std::string::npos) << st.message();
  }
}

TEST(ServeSlo, EveryGapMustMeetTheItlObjective) {
  ServeSlo slo;
  slo.ttft_s = 1.0;
  slo.itl_s = 0.1;
  const std::vector<double> smooth = {0.05, 0.09, 0.1}, one_stall = {0.05, 0.5, 0.05};
  EXPECT_TRUE(meets_slo(slo, {true, 0.9, 2.0, smooth, 4}));
  EXPECT_FALSE(meets_slo(slo, {true, 0.9, 2.0, one_stall, 4}));
  EXPECT_FALSE(meets_slo(slo, {true, 1.1, 2.0, smooth, 4}));   // late first token
  EXPECT_FALSE(meets_slo(slo, {false, 0.1, 0.2, smooth, 4}));  // failed requests never count
  ServeSlo tpot;
  tpot.tpot_s = 0.1;
  EXPECT_TRUE(meets_slo(tpot, {true, 1.0, 1.25, one_stall, 4}));  // 83 ms per token
  EXPECT_FALSE(meets_slo(tpot, {true, 1.0, 1.5, one_stall, 4}));
}

}  // namespace
}  // namespace vela
