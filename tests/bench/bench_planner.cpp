// POET planning time (greedy heuristic, LP bound, then CBC if needed) for zoo models at 50 %
// of store-all memory (70 % too for VGG-16, whose largest working set is over half), no
// deadline, on the nRF52840 profile, CBC with 2 threads, relative gap 1 %, time limit 60 s.
// Run: build/tests/bench/bench_planner [--benchmark_filter=mlp]
// Counters: nodes, variables, binaries, rows, solved (1 = a schedule), optimal (1 = gap met),
// gap_pct, energy_vs_store_all_pct.

#include <benchmark/benchmark.h>

#include "app/board_costs.h"
#include "devices/board_profile.h"
#include "planner/graph.h"
#include "planner/milp.h"
#include "planner/poet.h"
#include "planner/zoo.h"

namespace {

using namespace ergon;

void BM_Poet(benchmark::State& state, const std::string& model, int percent) {
  const auto board = *devices::find_board("nrf52840");
  const auto graph =
      planner::build_training_graph(planner::zoo_model(model, 1), app::BoardProfileCosts(board));
  planner::PlanRequest req;
  req.budget_bytes = graph.store_all_peak_bytes() * static_cast<uint64_t>(percent) / 100;
  req.deadline_s = std::numeric_limits<double>::infinity();
  req.time_limit_s = 60;
  req.relative_gap = 0.01;
  req.threads = 2;
  auto solver = planner::make_cbc_solver();
  planner::PlanResult r;
  for (auto _ : state) r = planner::plan_poet(graph, req, *solver);
  state.counters["nodes"] = graph.size();
  state.counters["variables"] = r.variables;
  state.counters["binaries"] = r.integers;
  state.counters["rows"] = r.rows;
  state.counters["solved"] = r.schedule ? 1 : 0;
  state.counters["optimal"] = r.status == planner::ModelStatus::kOptimal ? 1 : 0;
  state.counters["gap_pct"] = 100 * r.gap;
  state.counters["bound_vs_store_all_pct"] =
      r.schedule ? 100 * (r.bound_j / graph.single_pass_energy_j() - 1) : -1;
  state.counters["energy_vs_store_all_pct"] =
      r.schedule ? 100 * (r.objective_j / graph.single_pass_energy_j() - 1) : -1;
}

BENCHMARK_CAPTURE(BM_Poet, mlp, std::string("mlp"), 50)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Poet, bert_tiny, std::string("bert-tiny"), 50)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Poet, vgg16_cifar, std::string("vgg16-cifar"), 50)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Poet, vgg16_cifar_at70, std::string("vgg16-cifar"), 70)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Poet, resnet18_cifar, std::string("resnet18-cifar"), 50)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Poet, mobilenetv2_cifar, std::string("mobilenetv2-cifar"), 50)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Poet, bert_base, std::string("bert-base"), 50)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
