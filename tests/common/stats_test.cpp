#include "common/stats.h"

#include <gtest/gtest.h>

namespace ergon {
namespace {

TEST(Stats, TheMedianIsTheMiddleValueAndTheUpperMiddleOfAnEvenCount) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 3);
}

TEST(Stats, AQuantileIsTheNearestRankValue) {
  std::vector<double> v;
  for (int i = 1; i <= 20; ++i) v.push_back(21 - i);  // 20 .. 1, unordered on purpose
  EXPECT_EQ(quantile(v, 0.95), 19);
  EXPECT_EQ(quantile(v, 1.0), 20);
  EXPECT_EQ(quantile(v, 0.5), 10);
  EXPECT_EQ(quantile({7}, 0.95), 7);
  EXPECT_EQ(quantile({}, 0.95), 0);
}

}  // namespace
}  // namespace ergon
