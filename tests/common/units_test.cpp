// What people read for each quantity: one formatter each, the same everywhere.

#include "common/units.h"

#include <gtest/gtest.h>

#include <limits>

namespace ergon {
namespace {

TEST(Units, BytesUseBinaryUnitsAsBudgetsAreGiven) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(20'171'776), "19.24 MiB");
  EXPECT_EQ(format_bytes(3ULL << 30), "3.00 GiB");
}

TEST(Units, DurationsScaleFromMicrosecondsToHours) {
  EXPECT_EQ(format_duration(2.683), "2.683 s");
  EXPECT_EQ(format_duration(0.0125), "12.5 ms");
  EXPECT_EQ(format_duration(850e-6), "850 µs");
  EXPECT_EQ(format_duration(0), "0 s");
  EXPECT_EQ(format_duration(200), "3 min 20 s");
  EXPECT_EQ(format_duration(7500), "2 h 05 min");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "unbounded");
}

TEST(Units, EnergiesAndPowersKeepFourSignificantDigits) {
  EXPECT_EQ(format_energy(7.9934), "7.993 J");
  EXPECT_EQ(format_energy(0.0412), "41.2 mJ");
  EXPECT_EQ(format_energy(12'345), "12.35 kJ");
  EXPECT_EQ(format_power(3.21), "3.21 W");
  EXPECT_EQ(format_power(0.85), "850 mW");
  EXPECT_EQ(format_power(std::numeric_limits<double>::quiet_NaN()), "unknown");
}

}  // namespace
}  // namespace ergon
