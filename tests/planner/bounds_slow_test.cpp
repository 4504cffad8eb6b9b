// The memory bound against the exhaustive optimum on many more random graphs than the fast
// checks (bounds_test.cpp): a bound above the optimum would let the planner call a poor
// schedule optimal, and each rule the bound adds (whole tensors, certain absences) is a new
// way to overshoot. About two minutes on one core, both tests.

#include <gtest/gtest.h>

#include "bound_checks.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner {
namespace {

TEST(MemoryBound, NeverExceedsTheExhaustiveOptimumOnFourHundredFiftyRandomGraphs) {
  const int plain = testing::bound_cases_below_exhaustive_optimum(
      300, [](uint32_t seed) { return testing::random_forward(3 + static_cast<int>(seed % 2), seed, seed % 2 == 0); });
  const int mixed = testing::bound_cases_below_exhaustive_optimum(
      150, [](uint32_t seed) { return testing::random_forward_mixed_saves(4, seed); });
  RecordProperty("binding_cases", plain + mixed);
  EXPECT_GE(plain + mixed, 3000);  // the bound says more than one pass in most of them
}

// The same on graphs of five ops (11 nodes), where chains of recomputation run deeper.
TEST(MemoryBound, NeverExceedsTheExhaustiveOptimumOnFiveOpGraphs) {
  const int binding = testing::bound_cases_below_exhaustive_optimum(
      20, [](uint32_t seed) { return testing::random_forward_mixed_saves(5, seed); });
  RecordProperty("binding_cases", binding);
  EXPECT_GE(binding, 150);
}

}  // namespace
}  // namespace ergon::planner
