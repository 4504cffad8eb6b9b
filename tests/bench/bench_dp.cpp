// Rotor and POFO dynamic programs on chains (DESIGN.md target: a 100-stage chain in
// milliseconds). A chain of `ops` linear layers (heterogeneous sizes and work, every op saving
// its input, the pattern of an MLP) on the Raspberry Pi 4 profile, at 60 % of store-all's
// activation peak, with the default (automatic) slot count.
// Run: build/tests/bench/bench_dp
// Counters: nodes (training graph), slots_exact (1 when sizes share a countable unit),
// energy_vs_store_all_pct, recomputes, page_outs.

#include <benchmark/benchmark.h>

#include <limits>
#include <random>

#include "app/board_costs.h"
#include "devices/board_profile.h"
#include "planner/graph.h"
#include "planner/rotor.h"
#include "planner/schedule.h"

namespace {

using namespace ergon;

planner::TrainingGraph chain(int ops) {
  planner::ForwardGraph f;
  f.name = "chain" + std::to_string(ops);
  f.input_bytes = 64 * 1024;
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint64_t> width(64, 512);
  uint64_t in = 256;
  for (int i = 0; i < ops; ++i) {
    const uint64_t out = width(rng);
    planner::ForwardOp op;
    op.name = "fc" + std::to_string(i);
    op.op = "linear";
    op.inputs = {i == 0 ? planner::kGraphInput : i - 1};
    op.forward_flops = 2 * 32 * in * out;  // batch 32
    op.backward_flops = 2 * op.forward_flops;
    op.output_bytes = 4 * 32 * out;
    op.param_bytes = 4 * in * out;
    f.ops.push_back(op);
    in = out;
  }
  const auto board = *devices::find_board("pi4");
  return planner::build_training_graph(f, app::BoardProfileCosts(board));
}

template <planner::PlanResult (*Plan)(const planner::TrainingGraph&, const planner::PlanRequest&,
                                      int)>
void BM_ChainDp(benchmark::State& state) {
  const auto graph = chain(static_cast<int>(state.range(0)));
  planner::PlanRequest req;
  req.budget_bytes = graph.store_all_peak_bytes() * 6 / 10;
  req.deadline_s = std::numeric_limits<double>::infinity();
  planner::PlanResult r;
  for (auto _ : state) r = Plan(graph, req, planner::kRotorAutoSlots);
  state.counters["nodes"] = graph.size();
  state.counters["solved"] = r.schedule ? 1 : 0;
  if (!r.schedule) return;
  const auto sim = planner::simulate(graph, *r.schedule);
  state.counters["energy_vs_store_all_pct"] = 100 * (r.objective_j / graph.single_pass_energy_j() - 1);
  state.counters["recomputes"] = sim.recomputes;
  state.counters["page_outs"] = sim.page_outs;
}

BENCHMARK_TEMPLATE(BM_ChainDp, planner::plan_rotor)->Arg(25)->Arg(50)->Arg(100)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_ChainDp, planner::plan_pofo)->Arg(25)->Arg(50)->Arg(100)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
