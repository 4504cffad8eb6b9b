#include "app/quantities.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"

namespace ergon::app {
namespace {

TEST(Budget, SizesInEveryUnitAndPercentOfStoreAll) {
  EXPECT_EQ(Budget::parse("3000000").bytes(0), 3000000U);
  EXPECT_EQ(Budget::parse("2MiB").bytes(0), 2U << 20);
  EXPECT_EQ(Budget::parse("2 mib").bytes(0), 2U << 20);
  EXPECT_EQ(Budget::parse("1.5MB").bytes(0), 1500000U);
  EXPECT_EQ(Budget::parse("512KiB").bytes(0), 512U * 1024);
  EXPECT_EQ(Budget::parse("1GB").bytes(0), 1000000000U);
  EXPECT_EQ(Budget::parse("50%").bytes(1000), 500U);
  EXPECT_TRUE(Budget::parse(" 30 % ").percent());
  EXPECT_FALSE(Budget::parse("30MiB").percent());
}

TEST(Budget, AnythingElseIsRefusedNamingTheText) {
  for (const char* bad : {"lots", "0", "-5MiB", "5 parsecs", "", "%", "1e6"}) {
    try {
      Budget::parse(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("budget '" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Deadline, FactorsOfOnePassSecondsAndNone) {
  EXPECT_DOUBLE_EQ(Deadline::parse("1.5x").seconds(2.0), 3.0);
  EXPECT_DOUBLE_EQ(Deadline::parse("0.2s").seconds(2.0), 0.2);
  EXPECT_DOUBLE_EQ(Deadline::parse("250ms").seconds(2.0), 0.25);
  EXPECT_TRUE(std::isinf(Deadline::parse("none").seconds(2.0)));
  EXPECT_TRUE(std::isinf(Deadline::parse("inf").seconds(2.0)));
  for (const char* bad : {"soon", "0x", "1.3", "2h", ""}) EXPECT_THROW(Deadline::parse(bad), InputError) << bad;
}

TEST(Duration, SecondsMillisecondsAndMinutes) {
  EXPECT_DOUBLE_EQ(Duration::parse("10").seconds, 10);
  EXPECT_DOUBLE_EQ(Duration::parse("10s").seconds, 10);
  EXPECT_DOUBLE_EQ(Duration::parse("500ms").seconds, 0.5);
  EXPECT_DOUBLE_EQ(Duration::parse("2m").seconds, 120);
  try {
    Duration::parse("soon", "--duration");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--duration must be a time like 10s, 500ms or 2m, not 'soon'");
  }
  EXPECT_THROW(Duration::parse("0s"), InputError);
  EXPECT_THROW(Duration::parse("-1s"), InputError);
}

}  // namespace
}  // namespace ergon::app
