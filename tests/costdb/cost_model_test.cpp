#include "costdb/cost_model.h"

#include <gtest/gtest.h>

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
