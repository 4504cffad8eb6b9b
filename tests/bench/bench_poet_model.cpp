// Size of the POET MILP and the time CLP's dual simplex takes on its LP relaxation (the
// bound plan_poet proves gaps with), for zoo models at 50 % of store-all activation memory
// on the nRF52840 profile, POET's objective, no deadline; LP limit 300 s.
// Run: build/tests/bench/bench_poet_model [--benchmark_filter=resnet18]
// Counters: nodes, variables, binaries, rows, nonzeros, lp_solved (1 = optimal within the
// limit), lp_bound_vs_one_pass_pct.
// BM_MemoryBound: the time of the memory bound alone under the total objective (published
// profile, 30 % of store-all's activations), with its bound_vs_one_pass_pct.

#include <benchmark/benchmark.h>

#include <limits>

#include "app/board_costs.h"
#include "devices/board_profile.h"
#include "planner/bounds.h"
#include "planner/graph.h"
#include "planner/milp.h"
#include "planner/poet.h"
#include "planner/zoo.h"

namespace {

using namespace ergon;

void BM_PoetLp(benchmark::State& state, const std::string& model, planner::Objective objective) {
  const auto board = *devices::find_board("nrf52840");
  const auto graph =
      planner::build_training_graph(planner::zoo_model(model, 1), app::BoardProfileCosts(board));
  planner::PlanRequest req;
  req.objective = objective;
  req.activations_only = true;
  req.budget_bytes = graph.store_all_peak_bytes() / 2;
  req.deadline_s = std::numeric_limits<double>::infinity();
  const planner::MilpModel m = planner::build_poet_model(graph, req).model;
  auto solver = planner::make_cbc_solver();
  planner::RelaxationResult lp;
  for (auto _ : state) lp = solver->solve_relaxation(m, std::getenv("ERGON_NO_LP") ? 0.01 : 300);
  state.counters["nodes"] = graph.size();
  state.counters["variables"] = m.num_vars();
  state.counters["binaries"] = m.num_integers();
  state.counters["rows"] = m.num_rows();
  state.counters["nonzeros"] = static_cast<double>(m.num_nonzeros());
  state.counters["memory_bound_vs_one_pass_pct"] =
      100 * (planner::memory_lower_bound_j(graph, req.budget_bytes, objective) /
                 graph.single_pass_energy_j() -
             1);
  state.counters["lp_solved"] = lp.optimal ? 1 : 0;
  state.counters["lp_bound_vs_one_pass_pct"] =
      lp.optimal ? 100 * (lp.objective - 1) : -1;  // the model's energy is in single passes
}

void BM_MemoryBound(benchmark::State& state, const std::string& model, const std::string& board_name) {
  const auto board = *devices::find_board(board_name);
  const auto graph =
      planner::build_training_graph(planner::zoo_model(model, 1), app::BoardProfileCosts(board));
  const uint64_t budget = graph.store_all_peak_bytes() * 3 / 10;
  double bound_j = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(bound_j = planner::memory_lower_bound_j(graph, budget, planner::Objective::kTotal));
  state.counters["nodes"] = graph.size();
  state.counters["bound_vs_one_pass_pct"] = 100 * (bound_j / graph.single_pass_energy_j() - 1);
}
BENCHMARK_CAPTURE(BM_MemoryBound, mlp_tx2, std::string("mlp"), std::string("tx2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MemoryBound, bert_base_pi4, std::string("bert-base"), std::string("pi4"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MemoryBound, resnet50_pi4, std::string("resnet50"), std::string("pi4"))
    ->Unit(benchmark::kMillisecond);

constexpr auto kPoet = planner::Objective::kPoet;
#define ERGON_LP_BENCH(name, model)                                              \
  BENCHMARK_CAPTURE(BM_PoetLp, name, std::string(model), kPoet)                  \
      ->Iterations(1)                                                            \
      ->Unit(benchmark::kSecond)                                                 \
      ->UseRealTime()
ERGON_LP_BENCH(mlp, "mlp");
ERGON_LP_BENCH(bert_tiny, "bert-tiny");
ERGON_LP_BENCH(resnet18_cifar, "resnet18-cifar");
ERGON_LP_BENCH(mobilenetv2_cifar, "mobilenetv2-cifar");
ERGON_LP_BENCH(bert_base, "bert-base");

}  // namespace
