// The exhaustive oracle of the planner tests (tests/planner/brute_force.h): how long its
// optimum takes on the random graphs the bound tests use, every budget of a family at once
// (docs/performance.md, thirty-second increment); and how near the greedy search comes to
// it there (thirty-third increment).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "brute_force.h"
#include "planner/stage_plan.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner {
namespace {

// Args: ops per graph, seeds (0 to seeds - 1), objective (0 poet, 1 total); 7 budgets each,
// from the least working set to store-all, no deadline.
void BM_ExhaustiveOptimumOfMixedSavesGraphs(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  const auto seeds = static_cast<uint32_t>(state.range(1));
  const Objective objective = state.range(2) == 0 ? Objective::kPoet : Objective::kTotal;
  for (auto _ : state) {
    int solved = 0;
    for (uint32_t seed = 0; seed < seeds; ++seed) {
      const ForwardGraph forward = testing::random_forward_mixed_saves(ops, seed);
      const auto g = testing::costed_for(forward, objective);
      for (const uint64_t budget : testing::seven_budgets(g)) {
        const double j = testing::BruteForce(g, budget, std::numeric_limits<double>::infinity(), objective).min_energy();
        benchmark::DoNotOptimize(j);
        ++solved;
      }
    }
    state.counters["cases"] = solved;
  }
}
BENCHMARK(BM_ExhaustiveOptimumOfMixedSavesGraphs)
    ->ArgNames({"ops", "seeds", "total"})
    ->Args({4, 12, 0})
    ->Args({4, 12, 1})
    ->Args({5, 21, 0})
    ->Args({5, 21, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The greedy search (greedy_stage_plan, one thread, no seeds, run until it ends) against the
// exhaustive optimum on the same graphs. Counters: budgets with a schedule, plans found, plans
// at the optimum, and the worst plan's excess over it in percent.
void BM_GreedySearchAgainstTheExhaustiveOptimum(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  const auto seeds = static_cast<uint32_t>(state.range(1));
  const Objective objective = state.range(2) == 0 ? Objective::kPoet : Objective::kTotal;
  const double unlimited = std::numeric_limits<double>::infinity();
  for (auto _ : state) {
    int cases = 0;
    int plans = 0;
    int optimal = 0;
    double worst_pct = 0;
    for (uint32_t seed = 0; seed < seeds; ++seed) {
      const ForwardGraph forward = testing::random_forward_mixed_saves(ops, seed);
      const auto g = testing::costed_for(forward, objective);
      for (const uint64_t budget : testing::seven_budgets(g)) {
        const double truth = testing::BruteForce(g, budget, unlimited, objective).min_energy();
        if (std::isinf(truth)) continue;
        ++cases;
        const auto plan = greedy_stage_plan(g, budget, unlimited, {}, unlimited, objective);
        if (!plan) continue;
        ++plans;
        const double excess_pct = 100 * (evaluate_stage_plan(g, *plan, objective).energy_j - truth) / truth;
        optimal += excess_pct <= 1e-7;
        worst_pct = std::max(worst_pct, excess_pct > 1e-7 ? excess_pct : 0.0);
      }
    }
    state.counters["cases"] = cases;
    state.counters["plans"] = plans;
    state.counters["optimal"] = optimal;
    state.counters["worst_pct"] = worst_pct;
  }
}
BENCHMARK(BM_GreedySearchAgainstTheExhaustiveOptimum)
    ->ArgNames({"ops", "seeds", "total"})
    ->Args({4, 40, 0})
    ->Args({4, 40, 1})
    ->Args({5, 21, 0})
    ->Args({5, 21, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace ergon::planner
