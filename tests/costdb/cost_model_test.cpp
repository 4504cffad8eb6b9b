#include "costdb/cost_model.h"

#include <gtest/gtest.h>

#include <tuple>

#include "costdb/costs.h"
#include "costdb/plans.h"
#include "costdb_test_util.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ergon::costdb {
namespace {

TEST(CostFit, RooflineRecoversOverheadAndBothRatesFromComputeAndMemoryBoundOps) {
  // time = 15 us + max(flops / 3 GFLOP/s, bytes / 4 GB/s)
  auto truth = [](double f, double b) { return 15e-6 + std::max(f / 3e9, b / 4e9); };
  std::vector<std::array<double, 3>> rows;
  for (double f : {1e6, 5e7, 2e8, 1e9})
    for (double b : {1e4, 4e6, 3e7}) rows.push_back({f, b, truth(f, b)});
  const auto fit = fit_non_negative(rows, FitShape::kRoofline);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->coef[0], 15e-6, 1e-9);
  EXPECT_NEAR(fit->coef[1], 1 / 3e9, 1e-14);
  EXPECT_NEAR(fit->coef[2], 1 / 4e9, 1e-14);
  EXPECT_LT(fit->cv_max, 1e-6);
  EXPECT_NEAR(fit->predict(3e8, 1e8), truth(3e8, 1e8), 1e-9);  // a shape it never saw
}

TEST(CostFit, CoefficientsStayNonNegativeWhereLeastSquaresWouldGoBelowZero) {
  // y falls with x2: plain least squares would give x2 a negative rate.
  const std::vector<std::array<double, 3>> rows = {
      {1, 10, 5.0}, {2, 5, 5.5}, {3, 1, 6.2}, {4, 0, 6.9}, {5, 8, 7.1}};
  const auto fit = fit_non_negative(rows);
  ASSERT_TRUE(fit);
  for (double c : fit->coef) EXPECT_GE(c, 0);
  EXPECT_GT(fit->coef[1], 0);
  EXPECT_GT(fit->cv_median, 0);
}

TEST(CostFit, TooFewRowsGiveNoFit) {
  const std::vector<std::array<double, 3>> rows = {{1, 1, 1}, {2, 2, 2}};
  EXPECT_FALSE(fit_non_negative(rows));
}

}  // namespace
}  // namespace ergon::costdb

namespace ergon::costdb {
namespace {

class MeasuredCostsTest : public testing::TempDirTest {};

/// Gives `row` a power reading of `power_w` over `samples` samples, with a spread of
/// `spread` (relative) in energy.
void read_power(OpCostRow& row, double power_w, uint32_t samples, double spread) {
  row.gross_energy_j = power_w * row.time_s;
  row.net_energy_j = 0.5 * power_w * row.time_s;
  row.energy_j_stddev = spread * power_w * row.time_s;
  row.sample_count = samples;
}

/// A time-only profile run of linear layers forward and backward, and paging of three sizes,
/// with the times given; three windows a shape (as a profile plan measures them).
/// Entries with copies (PlannedOp::copies) come in `cached`.
/// With `power_w`, every window also reads that power over 60 samples.
void store_profile(Database& db, const std::vector<std::tuple<profiler::OpShape, profiler::Phase, double>>& ops,
                   const std::vector<std::tuple<profiler::OpShape, profiler::Phase, double, uint16_t>>& cached = {},
                   double power_w = 0) {
  RunWriter run(db, testing::sim_board(), "sim", 1);
  std::vector<OpCostRow> rows;
  uint32_t id = 1;
  for (const auto& [shape, phase, time_s, copies] : cached) {
    run.add_op(id, shape, phase, copies);
    rows.push_back({.run_id = run.run_id(), .op_id = id, .phase = phase, .time_s = time_s, .time_s_stddev = 0.01 * time_s});
    ++id;
  }
  for (const auto& [shape, phase, time_s] : ops) {
    run.add_op(id, shape, phase);
    rows.push_back({.run_id = run.run_id(), .op_id = id, .phase = phase, .time_s = time_s, .time_s_stddev = 0.01 * time_s});
    ++id;
  }
  if (power_w > 0)
    for (OpCostRow& r : rows) read_power(r, power_w, 60, 0.02);
  replace_attribution(db, run.run_id(), {}, rows);
  db.commit_batch();
}

/// Paging of three sizes each way, as a profile plan measures it.
void add_paging(std::vector<std::tuple<profiler::OpShape, profiler::Phase, double>>& ops) {
  for (uint32_t bytes : {4096U, 65536U, 1048576U}) {
    ops.emplace_back(profiler::paging(bytes), profiler::Phase::kPageOut, 1e-3 + bytes * 1e-8);
    ops.emplace_back(profiler::paging(bytes), profiler::Phase::kPageIn, 5e-4 + bytes * 5e-9);
  }
}

TEST_F(MeasuredCostsTest, ABackwardPassWithItsForwardPassesCountsKeepsItsOwnMeasuredTime) {
  using profiler::Phase;
  auto db = Database::open(db_path());
  // The first layer's backward pass (it reads only the data) has the same FLOP and byte counts
  // as its forward pass here, and is measured to take three times as long.
  profiler::OpShape first = profiler::linear(1, 784, 1024, Phase::kForward);
  profiler::OpShape first_back = first;
  std::vector<std::tuple<profiler::OpShape, Phase, double>> ops = {
      {first, Phase::kForward, 100e-6},
      {first_back, Phase::kBackward, 300e-6},
      {profiler::linear(1, 1024, 1024, Phase::kForward), Phase::kForward, 120e-6},
      {profiler::linear(1, 1024, 10, Phase::kForward), Phase::kForward, 5e-6},
  };
  add_paging(ops);
  store_profile(db, ops);
  const MeasuredCosts costs = MeasuredCosts::from_database(db, "pi4");
  EXPECT_FALSE(costs.has_energy());
  const uint64_t bytes = first.bytes_in + first.bytes_out;
  EXPECT_DOUBLE_EQ(costs.compute(Phase::kForward, first.flops, bytes).time_s, 100e-6);
  EXPECT_DOUBLE_EQ(costs.compute(Phase::kBackward, first.flops, bytes).time_s, 300e-6);
  EXPECT_TRUE(costs.compute(Phase::kBackward, first.flops, bytes).measured);
}

/// An executed schedule's steps (runs.plan 'execute'), each timed once per iteration.
/// With `power_w`, each step also reads that power over the 3 samples its time spans.
int64_t store_execution(Database& db, const std::vector<std::tuple<profiler::OpShape, profiler::Phase, double>>& steps,
                        double power_w = 0) {
  RunWriter run(db, testing::sim_board(), "sim", 2, RunPlan::kExecute);
  std::vector<OpCostRow> rows;
  uint32_t id = 1;
  for (const auto& [shape, phase, time_s] : steps) {
    run.add_op(id, shape, phase);
    rows.push_back({.run_id = run.run_id(), .op_id = id, .phase = phase, .time_s = time_s});
    if (power_w > 0) read_power(rows.back(), power_w, 3, 0.3);
    ++id;
  }
  replace_attribution(db, run.run_id(), {}, rows);
  db.commit_batch();
  return run.run_id();
}

/// Stores a validation of a `planner` plan that executed `run_id`, as ergon validate does.
void store_validation_of(Database& db, const std::string& planner, int64_t run_id) {
  PlanRow plan{.model = "mlp batch 1", .board_kind = "pi4", .cost_source = PlanCostSource::kMeasured,
               .budget_bytes = 1 << 20, .planner = planner, .status = "feasible"};
  const int64_t plan_id = add_plan(db, plan);
  add_validation(db, {.plan_id = plan_id, .run_id = run_id});
  db.commit_batch();
}

TEST_F(MeasuredCostsTest, CostsFromIterationsTakeTheStoreAllSchedulesStepsAndTheProfileForTheRest) {
  using profiler::Phase;
  auto db = Database::open(db_path());
  const profiler::OpShape hidden = profiler::linear(1, 1024, 1024, Phase::kForward);
  const profiler::OpShape first = profiler::linear(1, 784, 1024, Phase::kForward);
  std::vector<std::tuple<profiler::OpShape, Phase, double>> ops = {
      {first, Phase::kForward, 100e-6},
      {hidden, Phase::kForward, 120e-6},
      {profiler::linear(1, 1024, 10, Phase::kForward), Phase::kForward, 5e-6},
  };
  add_paging(ops);
  store_profile(db, ops);
  // The same hidden layer, inside an iteration, took 170 us, and in a later store-all
  // iteration 150 us (the latest stands: the machine as it runs now); the last layer ran
  // only in the earlier one, the first layer in neither.
  const profiler::OpShape last = profiler::linear(1, 1024, 10, Phase::kForward);
  store_execution(db, {{hidden, Phase::kForward, 170e-6}, {last, Phase::kForward, 7e-6}});
  store_execution(db, {{hidden, Phase::kForward, 150e-6}});
  // A schedule that recomputes and pages (what a validation measures) is never costs.
  store_execution(db, {{hidden, Phase::kForward, 900e-6},
                       {hidden, Phase::kRecompute, 900e-6},
                       {profiler::paging(65536), Phase::kPageOut, 9e-3}});
  const uint64_t hidden_bytes = hidden.bytes_in + hidden.bytes_out;
  const uint64_t first_bytes = first.bytes_in + first.bytes_out;

  const MeasuredCosts profile = MeasuredCosts::from_database(db, "pi4");
  EXPECT_DOUBLE_EQ(profile.compute(Phase::kForward, hidden.flops, hidden_bytes).time_s, 120e-6);
  EXPECT_EQ(profile.iteration_shapes(), 0);

  const MeasuredCosts iteration = MeasuredCosts::from_database(db, "pi4", std::nullopt, TimedIn::kIteration);
  EXPECT_DOUBLE_EQ(iteration.compute(Phase::kForward, hidden.flops, hidden_bytes).time_s, 150e-6);
  EXPECT_DOUBLE_EQ(iteration.compute(Phase::kForward, first.flops, first_bytes).time_s, 100e-6);
  EXPECT_DOUBLE_EQ(iteration.compute(Phase::kForward, last.flops, last.bytes_in + last.bytes_out).time_s, 7e-6);
  EXPECT_DOUBLE_EQ(iteration.page_out(65536).time_s, 1e-3 + 65536 * 1e-8);
  EXPECT_EQ(iteration.iteration_shapes(), 2);
  EXPECT_EQ(iteration.runs(), 3);  // the profile and both store-all executions
}

TEST_F(MeasuredCostsTest, PagingFromIterationsComesFromThePageAllScheduleOnlyAndItsComputesAreNotCosts) {
  using profiler::Phase;
  auto db = Database::open(db_path());
  const profiler::OpShape hidden = profiler::linear(1, 1024, 1024, Phase::kForward);
  std::vector<std::tuple<profiler::OpShape, Phase, double>> ops = {
      {profiler::linear(1, 784, 1024, Phase::kForward), Phase::kForward, 100e-6},
      {hidden, Phase::kForward, 120e-6},
      {profiler::linear(1, 1024, 10, Phase::kForward), Phase::kForward, 5e-6},
  };
  add_paging(ops);  // a 64 KiB page-out 1.66 ms, page-in 0.83 ms
  store_profile(db, ops);
  store_execution(db, {{hidden, Phase::kForward, 150e-6}});  // store-all
  // The page-all schedule, executed: each 64 KiB transfer after a compute took longer than
  // the profile's back to back; its hidden layer ran at 400 us beside the transfers.
  const int64_t page_all = store_execution(db, {{hidden, Phase::kForward, 400e-6},
                                                {profiler::paging(65536), Phase::kPageOut, 2.5e-3},
                                                {profiler::paging(65536), Phase::kPageIn, 1.2e-3}});
  store_validation_of(db, "page-all", page_all);
  // Then POET's schedule at 50 %, validated: what is predicted, never a cost.
  const int64_t poet = store_execution(db, {{hidden, Phase::kForward, 900e-6},
                                            {profiler::paging(65536), Phase::kPageOut, 9e-3},
                                            {profiler::paging(65536), Phase::kPageIn, 7e-3}});
  store_validation_of(db, "poet", poet);
  const uint64_t hidden_bytes = hidden.bytes_in + hidden.bytes_out;

  const MeasuredCosts profile = MeasuredCosts::from_database(db, "pi4");
  EXPECT_DOUBLE_EQ(profile.page_out(65536).time_s, 1e-3 + 65536 * 1e-8);
  EXPECT_DOUBLE_EQ(profile.page_in(65536).time_s, 5e-4 + 65536 * 5e-9);

  const MeasuredCosts iteration = MeasuredCosts::from_database(db, "pi4", std::nullopt, TimedIn::kIteration);
  EXPECT_DOUBLE_EQ(iteration.page_out(65536).time_s, 2.5e-3);
  EXPECT_DOUBLE_EQ(iteration.page_in(65536).time_s, 1.2e-3);
  EXPECT_TRUE(iteration.page_out(65536).measured);
  EXPECT_DOUBLE_EQ(iteration.compute(Phase::kForward, hidden.flops, hidden_bytes).time_s, 150e-6);
  // Sizes the page-all schedule did not move keep the profile's.
  EXPECT_DOUBLE_EQ(iteration.page_out(4096).time_s, 1e-3 + 4096 * 1e-8);
  EXPECT_EQ(iteration.iteration_shapes(), 3);
  EXPECT_EQ(iteration.iteration_paging_shapes(), 2);
}

TEST_F(MeasuredCostsTest, AStepTimedInAnIterationDrawsTheProfilesPowerNotItsOwnFewSamples) {
  using profiler::Phase;
  auto db = Database::open(db_path());
  const profiler::OpShape hidden = profiler::linear(1, 1024, 1024, Phase::kForward);
  const profiler::OpShape last = profiler::linear(1, 1024, 10, Phase::kForward);
  std::vector<std::tuple<profiler::OpShape, Phase, double>> ops = {
      {profiler::linear(1, 784, 1024, Phase::kForward), Phase::kForward, 100e-6},
      {hidden, Phase::kForward, 120e-6},
      {last, Phase::kForward, 5e-6},
  };
  add_paging(ops);
  store_profile(db, ops, {}, 4.0);  // 4 W over every window's 60 samples
  // Inside an iteration the hidden layer took 150 us, and its 3 samples read 9 W; a shape
  // the profile never ran took 40 us.
  const profiler::OpShape unprofiled = profiler::linear(1, 512, 512, Phase::kForward);
  store_execution(db, {{hidden, Phase::kForward, 150e-6}, {unprofiled, Phase::kForward, 40e-6}}, 9.0);

  const MeasuredCosts costs = MeasuredCosts::from_database(db, "pi4", std::nullopt, TimedIn::kIteration);
  ASSERT_TRUE(costs.has_energy());
  const auto at_hidden = costs.compute(Phase::kForward, hidden.flops, hidden.bytes_in + hidden.bytes_out);
  EXPECT_DOUBLE_EQ(at_hidden.time_s, 150e-6);
  EXPECT_NEAR(at_hidden.energy_j, 4.0 * 150e-6, 1e-12);
  EXPECT_NEAR(at_hidden.energy_sigma_j, 0.02 * 4.0 * 150e-6, 1e-12);  // the profile's, scaled
  const auto at_unprofiled =
      costs.compute(Phase::kForward, unprofiled.flops, unprofiled.bytes_in + unprofiled.bytes_out);
  EXPECT_DOUBLE_EQ(at_unprofiled.time_s, 40e-6);
  EXPECT_NEAR(at_unprofiled.energy_j, 4.0 * 40e-6, 1e-12);  // its class's power
}

/// The profile of the test above, and a cache ladder timed on an ideal LRU cache of
/// `cache_bytes`: an add whose 192 KiB take 20 us warm and 100 us from memory, linear in the
/// share of its bytes still cached after (copies - 1) copies were touched.
void store_cached_profile(Database& db, double cache_bytes, const profiler::OpShape& warm_linear, double warm_s) {
  using profiler::Phase;
  const profiler::OpShape ladder = profiler::add(16384, Phase::kForward);
  const double bytes = static_cast<double>(ladder.bytes_in + ladder.bytes_out);
  auto lru_time = [&](double copies) {
    const double cached = std::clamp(cache_bytes - (copies - 1) * bytes, 0.0, bytes) / bytes;
    return 100e-6 - 80e-6 * cached;
  };
  std::vector<std::tuple<profiler::OpShape, Phase, double>> ops = {
      {ladder, Phase::kForward, lru_time(64)},  // the default rotation: 64 copies of it
      {warm_linear, Phase::kForward, 120e-6},
      {profiler::linear(1, 784, 1024, Phase::kForward), Phase::kForward, 100e-6},
      {profiler::linear(1, 1024, 10, Phase::kForward), Phase::kForward, 5e-6},
  };
  add_paging(ops);
  std::vector<std::tuple<profiler::OpShape, Phase, double, uint16_t>> cached = {
      {warm_linear, Phase::kForward, warm_s, 1}};
  for (const int copies : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256})
    cached.emplace_back(ladder, Phase::kForward, lru_time(copies), static_cast<uint16_t>(copies));
  store_profile(db, ops, cached);
}

TEST_F(MeasuredCostsTest, ACacheLadderGivesTheCacheAnOpsDataReallyGets) {
  using profiler::Phase;
  auto db = Database::open(db_path());
  const profiler::OpShape layer = profiler::linear(32, 1024, 1024, Phase::kForward);
  store_cached_profile(db, 8.0 * (1 << 20), layer, 60e-6);
  const MeasuredCosts costs = MeasuredCosts::from_database(db, "pi4");
  const auto curve = costs.cache();
  ASSERT_TRUE(curve);
  // Between the ladder's last entry still all cached (31 copies back: 5.8 MiB, and its own
  // 0.2 MiB) and its first all gone (47 back: 8.8 MiB).
  EXPECT_GT(curve->effective_bytes / (1 << 20), 6.0);
  EXPECT_LT(curve->effective_bytes / (1 << 20), 8.8);
  EXPECT_LT(curve->rms_rel_error, 0.05);
  EXPECT_EQ(curve->points, 13);
  // The planner's costs are the ones from memory, never the warm ones.
  const uint64_t bytes = layer.bytes_in + layer.bytes_out;
  EXPECT_DOUBLE_EQ(costs.compute(Phase::kForward, layer.flops, bytes).time_s, 120e-6);
  EXPECT_EQ(costs.warm_ops(), 2);
  // All cached: its warm time; nothing cached: its time from memory.
  EXPECT_NEAR(*costs.time_at_hit(*curve, Phase::kForward, layer.flops, bytes, 1.0), 60e-6, 1e-9);
  EXPECT_NEAR(*costs.time_at_hit(*curve, Phase::kForward, layer.flops, bytes, 0.0), 120e-6, 1e-9);
  const double half = *costs.time_at_hit(*curve, Phase::kForward, layer.flops, bytes, 0.5);
  EXPECT_GT(half, 60e-6);
  EXPECT_LT(half, 120e-6);
  // A shape never measured warm has no cached time.
  EXPECT_FALSE(costs.time_at_hit(*curve, Phase::kBackward, layer.flops, bytes, 1.0));
}

TEST_F(MeasuredCostsTest, ALargerCacheKeepsDataFurtherBack) {
  using profiler::Phase;
  const profiler::OpShape layer = profiler::linear(32, 1024, 1024, Phase::kForward);
  std::vector<double> fitted;
  for (double mib : {2.0, 24.0}) {
    const auto path = db_path().string() + std::to_string(static_cast<int>(mib));
    auto db = Database::open(path);
    store_cached_profile(db, mib * (1 << 20), layer, 60e-6);
    const auto c = MeasuredCosts::from_database(db, "pi4").cache();
    ASSERT_TRUE(c);
    fitted.push_back(c->effective_bytes / (1 << 20));
    EXPECT_GT(c->hit(0.5 * mib * (1 << 20), 65536), 0.5) << mib << " MiB";
    EXPECT_LT(c->hit(2 * mib * (1 << 20), 65536), 0.5) << mib << " MiB";
  }
  // Within the ladder's steps around each: 1.5 to 2.3 MiB, and 24.0 to 35.8 MiB.
  EXPECT_GT(fitted[0], 1.5);
  EXPECT_LT(fitted[0], 2.3);
  EXPECT_GT(fitted[1], 24.0);
  EXPECT_LT(fitted[1], 35.8);
}

TEST_F(MeasuredCostsTest, AProfileWithoutCacheEntriesHasNoCacheCurve) {
  using profiler::Phase;
  auto db = Database::open(db_path());
  std::vector<std::tuple<profiler::OpShape, Phase, double>> ops = {
      {profiler::linear(1, 784, 1024, Phase::kForward), Phase::kForward, 100e-6},
      {profiler::linear(1, 1024, 1024, Phase::kForward), Phase::kForward, 120e-6},
      {profiler::linear(1, 1024, 10, Phase::kForward), Phase::kForward, 5e-6},
  };
  add_paging(ops);
  store_profile(db, ops);
  const MeasuredCosts costs = MeasuredCosts::from_database(db, "pi4");
  EXPECT_FALSE(costs.cache());
  EXPECT_EQ(costs.warm_ops(), 0);
}

TEST(CacheCurve, FitsARealMachinesLatencyAgainstWorkingSetToItsLastLevelCache) {
  // A list walk of W bytes touches W - 64 other bytes between two loads of one line: beyond
  // the L2 (from 256 KiB on), the edge left is the 4 MiB L3's.
  std::ifstream in(std::string(ERGON_TEST_DATA_DIR) + "/cache/kaby_lake_list_latency.txt");
  ASSERT_TRUE(in);
  std::vector<std::pair<double, double>> points;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    double kib = 0, ns = 0;
    ASSERT_TRUE(fields >> kib >> ns) << line;
    if (kib >= 256) points.emplace_back(kib * 1024 - 64, ns * 1e-9);
  }
  ASSERT_EQ(points.size(), 7U);
  const auto curve = fit_cache_curve(points, 64);
  ASSERT_TRUE(curve);
  EXPECT_GT(curve->effective_bytes / (1 << 20), 3.0);
  EXPECT_LT(curve->effective_bytes / (1 << 20), 5.0);
  EXPECT_LT(curve->rms_rel_error, 0.06);
  EXPECT_GT(curve->hit(1 << 20, 64), 0.9);   // the L3 holds a list of 1 MiB
  EXPECT_LT(curve->hit(16 << 20, 64), 0.1);  // not one of 16 MiB
}

TEST(CacheCurve, TwoPointsAreTooFewToFit) {
  const std::vector<std::pair<double, double>> points = {{0, 1e-6}, {1e9, 2e-6}};
  EXPECT_FALSE(fit_cache_curve(points, 64));
}

}  // namespace
}  // namespace ergon::costdb
