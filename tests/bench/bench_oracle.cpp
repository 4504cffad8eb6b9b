// The exhaustive oracle of the planner tests (tests/planner/brute_force.h): how long its
// optimum takes on the random graphs the bound tests use, every budget of a family at once.
// Figures in docs/performance.md (thirty-second increment).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <limits>

#include "brute_force.h"
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
      const auto g = objective == Objective::kPoet ? build_training_graph(forward, testing::LinearCosts())
                                                   : build_training_graph(forward, testing::CostsWithIdle());
      const uint64_t lo = g.min_working_set_bytes();
      const uint64_t hi = g.store_all_peak_bytes();
      for (int step = 0; step <= 6; ++step) {
        const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(step) / 6;
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

}  // namespace
}  // namespace ergon::planner
