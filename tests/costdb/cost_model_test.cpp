#include "costdb/cost_model.h"

#include <gtest/gtest.h>

#include <tuple>

#include "costdb/costs.h"
#include "costdb_test_util.h"

#include <array>
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

/// A time-only profile run of linear layers forward and backward, and paging of three sizes,
/// with the times given; three windows a shape (as a profile plan measures them).
void store_profile(Database& db, const std::vector<std::tuple<profiler::OpShape, profiler::Phase, double>>& ops) {
  RunWriter run(db, testing::sim_board(), "sim", 1);
  std::vector<OpCostRow> rows;
  uint32_t id = 1;
  for (const auto& [shape, phase, time_s] : ops) {
    run.add_op(id, shape, phase);
    rows.push_back({.run_id = run.run_id(), .op_id = id, .phase = phase, .time_s = time_s, .time_s_stddev = 0.01 * time_s});
    ++id;
  }
  replace_attribution(db, run.run_id(), {}, rows);
  db.commit_batch();
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
  for (uint32_t bytes : {4096U, 65536U, 1048576U}) {
    ops.emplace_back(profiler::paging(bytes), Phase::kPageOut, 1e-3 + bytes * 1e-8);
    ops.emplace_back(profiler::paging(bytes), Phase::kPageIn, 5e-4 + bytes * 5e-9);
  }
  store_profile(db, ops);
  const MeasuredCosts costs = MeasuredCosts::from_database(db, "pi4");
  EXPECT_FALSE(costs.has_energy());
  const uint64_t bytes = first.bytes_in + first.bytes_out;
  EXPECT_DOUBLE_EQ(costs.compute(Phase::kForward, first.flops, bytes).time_s, 100e-6);
  EXPECT_DOUBLE_EQ(costs.compute(Phase::kBackward, first.flops, bytes).time_s, 300e-6);
  EXPECT_TRUE(costs.compute(Phase::kBackward, first.flops, bytes).measured);
}

}  // namespace
}  // namespace ergon::costdb
