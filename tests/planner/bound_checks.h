#pragma once

// Checks the memory bound against the exhaustive optimum (brute_force.h), shared by the fast
// and the slow planner tests.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "brute_force.h"
#include "planner/bounds.h"
#include "planner/graph.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner::testing {

// Calls `check(g, budget, objective, truth_j)` for each seed's graph under both objectives,
// at 7 budgets from the least working set to store-all, where a schedule exists; `truth_j`
// is the exhaustive optimum.
template <class Forward, class Check>
void for_each_exhaustive_case(uint32_t seeds, const Forward& forward_of_seed, const Check& check) {
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    for (Objective objective : {Objective::kPoet, Objective::kTotal}) {
      const ForwardGraph forward = forward_of_seed(seed);
      const auto g = costed_for(forward, objective);
      for (const uint64_t budget : seven_budgets(g)) {
        const double truth_j = BruteForce(g, budget, std::numeric_limits<double>::infinity(), objective).min_energy();
        if (std::isinf(truth_j)) continue;
        SCOPED_TRACE("seed " + std::to_string(seed) + " budget " + std::to_string(budget));
        check(g, budget, objective, truth_j);
      }
    }
  }
}

// Checks the memory bound against the exhaustive optimum (for_each_exhaustive_case);
// returns how many cases it binds (says more than one pass does).
template <class Forward>
int bound_cases_below_exhaustive_optimum(uint32_t seeds, const Forward& forward_of_seed) {
  int binding = 0;
  for_each_exhaustive_case(seeds, forward_of_seed,
                           [&](const TrainingGraph& g, uint64_t budget, Objective objective, double truth_j) {
                             const double bound = memory_lower_bound_j(g, budget, objective);
                             EXPECT_LE(bound, truth_j * (1 + 1e-9));
                             if (bound > g.single_pass_energy_j() * (1 + 1e-6)) ++binding;
                           });
  return binding;
}

}  // namespace ergon::planner::testing
