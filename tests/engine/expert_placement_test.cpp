// --moe-experts: what `auto` chooses against the memory limits, the weights the memory guard
// then counts, and a refusal that names the mapped choice.
#include "engine/expert_placement.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/memory_guard.h"

namespace vela {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

TEST(ExpertPlacement, ParsesTheThreeNamesAndRejectsOthers) {
  for (const ExpertPlacement p :
       {ExpertPlacement::kAuto, ExpertPlacement::kMapped, ExpertPlacement::kRepacked}) {
    auto parsed = parse_expert_placement(expert_placement_name(p));
    ASSERT_TRUE(parsed) << parsed.message();
    EXPECT_EQ(*parsed, p);
  }
  auto bad = parse_expert_placement("mmap");
  ASSERT_FALSE(bad);
  for (const char* name : {"'mmap'", "mapped", "repacked", "auto"})
    EXPECT_NE(bad.message().find(name), std::string::npos) << bad.message();
}

TEST(ExpertPlacement, AutoMapsTheExpertsOnlyWhenTheWholeModelWouldNotFit) {
  MemoryLimits limits;
  limits.mem_available = 16 * kGiB;
  limits.cgroup_limit = 8 * kGiB;
  const uint64_t experts = 6 * kGiB;
  // 1 GiB of KV + 6 GiB of file fit the cgroup's 8 GiB: repacked.
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kAuto, kGiB, 6 * kGiB, 5 * kGiB, limits),
            ExpertPlacement::kRepacked);
  // 1 + 8 > 8: mapped, whichever limit binds.
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kAuto, kGiB, 8 * kGiB, experts, limits),
            ExpertPlacement::kMapped);
  limits.cgroup_limit.reset();
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kAuto, kGiB, 8 * kGiB, experts, limits),
            ExpertPlacement::kRepacked);
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kAuto, kGiB, 16 * kGiB, experts, limits),
            ExpertPlacement::kMapped);
  // A dense model has nothing to map; nothing known never maps.
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kAuto, kGiB, 16 * kGiB, 0, limits),
            ExpertPlacement::kRepacked);
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kAuto, kGiB, 16 * kGiB, experts, {}),
            ExpertPlacement::kRepacked);
  // An explicit choice is kept, fitting or not.
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kRepacked, kGiB, 64 * kGiB, experts, limits),
            ExpertPlacement::kRepacked);
  EXPECT_EQ(choose_expert_placement(ExpertPlacement::kMapped, 0, kGiB, experts, limits),
            ExpertPlacement::kMapped);
}

TEST(ExpertPlacement, MappedExpertsAreNotCountedAsResident) {
  EXPECT_EQ(resident_weight_bytes(ExpertPlacement::kMapped, 10 * kGiB, 9 * kGiB), kGiB);
  EXPECT_EQ(resident_weight_bytes(ExpertPlacement::kRepacked, 10 * kGiB, 9 * kGiB), 10 * kGiB);
  EXPECT_EQ(resident_weight_bytes(ExpertPlacement::kMapped, kGiB, 2 * kGiB), 0u);
}

TEST(ExpertPlacement, TheGuardsRefusalNamesTheMappedChoice) {
  MemoryLimits limits;
  limits.cgroup_limit = 4 * kGiB;
  // Repacked: 1 GiB KV + 6 GiB file (5 GiB experts) do not fit 4 GiB.
  const Status repacked = check_memory_budget(kGiB, 6 * kGiB, limits, 5 * kGiB);
  ASSERT_FALSE(repacked.ok());
  const std::string m = repacked.message();
  EXPECT_NE(m.find("more than the cgroup's memory limit (4.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("--moe-experts mapped keeps the experts (5.00 GiB) in the file mapping"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("leaving 2.00 GiB resident"), std::string::npos) << m;
  // Mapped: only the 1 GiB of other weights count, and 2 GiB fit.
  const uint64_t resident = resident_weight_bytes(ExpertPlacement::kMapped, 6 * kGiB, 5 * kGiB);
  EXPECT_TRUE(check_memory_budget(kGiB, resident, limits, 0, true).ok());
  // Mapped and still too large: the message says the mapped experts are left out, and offers no
  // choice already taken.
  const Status still = check_memory_budget(4 * kGiB, resident, limits, 0, true);
  ASSERT_FALSE(still.ok());
  EXPECT_NE(still.message().find("other than the mapped experts"), std::string::npos)
      << still.message();
  EXPECT_EQ(still.message().find("--moe-experts"), std::string::npos) << still.message();
  // A dense model's refusal offers no expert choice either.
  const Status dense = check_memory_budget(kGiB, 6 * kGiB, limits);
  ASSERT_FALSE(dense.ok());
  EXPECT_EQ(dense.message().find("--moe-experts"), std::string::npos) << dense.message();
}

TEST(ExpertPlacement, TheLogLineSaysWhatAutoChoseAndWhy) {
  MemoryLimits limits;
  limits.cgroup_limit = 2 * kGiB;
  limits.mem_available = 16 * kGiB;
  const std::string mapped =
      describe_expert_choice(ExpertPlacement::kMapped, kGiB, 4 * kGiB, 3 * kGiB, limits);
  EXPECT_NE(mapped.find("experts mapped"), std::string::npos) << mapped;
  EXPECT_NE(mapped.find("would not fit"), std::string::npos) << mapped;
  EXPECT_NE(mapped.find("the cgroup limit (2.00 GiB)"), std::string::npos) << mapped;
  const std::string repacked =
      describe_expert_choice(ExpertPlacement::kRepacked, kGiB, 4 * kGiB, 3 * kGiB, {});
  EXPECT_NE(repacked.find("experts repacked"), std::string::npos) << repacked;
}

}  // namespace
}  // namespace vela
