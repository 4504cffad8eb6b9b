#include <gtest/gtest.h>

#include "probes/ina219_model.h"

namespace ergon::probes {
namespace {

TEST(Ina219Model, CalibrationFollowsTheDatasheetFormula) {
  // 0.04096 / (100 uA x 0.1 ohm) = 4096
  EXPECT_EQ(Ina219Model({.shunt_ohm = 0.1, .current_lsb_a = 100e-6}).calibration(), 4096);
  // trunc(0.04096 / (10 uA x 1 ohm)) = 4096; odd results lose bit 0
  EXPECT_EQ(Ina219Model({.shunt_ohm = 0.3, .current_lsb_a = 100e-6}).calibration(), 1364);
}

TEST(Ina219Model, QuantizesToTheChipsLsbsAndReportsPowerFromItsOwnRegister) {
  const Ina219Model ina({.shunt_ohm = 0.1, .current_lsb_a = 100e-6});
  const auto regs = ina.convert(5.0, 0.6, 0.0);
  EXPECT_EQ(regs.shunt, 6000);                  // 60 mV / 10 uV
  EXPECT_EQ(regs.bus >> 3, 1250);               // 5 V / 4 mV
  EXPECT_EQ(regs.current, 6000);                // 0.6 A / 100 uA
  EXPECT_EQ(regs.power, 6000 * 1250 / 5000);    // datasheet: current x bus / 5000
  const auto s = ina.decode(regs, 2, 77);
  EXPECT_EQ(s.rail, 2);
  EXPECT_EQ(s.t_ticks, 77U);
  EXPECT_EQ(s.bus_uv, 5'000'000);
  EXPECT_EQ(s.current_ua, 600'000);
  EXPECT_EQ(s.power_uw, 1500 * 2000);  // power LSB = 20 x current LSB = 2 mW
  EXPECT_EQ(s.flags, kSampleOk);
}

TEST(Ina219Model, FlagsOverflowWhenTheShuntVoltageLeavesItsRange) {
  const Ina219Model ina({.shunt_ohm = 0.1, .current_lsb_a = 100e-6});
  const auto s = ina.decode(ina.convert(5.0, 4.0, 0.0), 0, 0);  // 400 mV > 320 mV
  EXPECT_TRUE(s.flags & kSampleOverflow);
  EXPECT_EQ(s.current_ua, 3'200'000);  // clipped at the range
}

}  // namespace
}  // namespace ergon::probes
