#include "probes/ina2xx.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "tests/support/fake_clock.h"
#include "common/error.h"
#include "probes/sim_ina2xx.h"

namespace ergon::probes {
namespace {

using ergon::testing::FakeClock;

/// A chip on a simulated bus whose transactions take their wire time on a fake clock.
struct Bench {
  explicit Bench(Ina2xxChip chip, double shunt_ohm, SupplyState truth, double noise_v = 0)
      : bus(clock), sim(chip, shunt_ohm, [this](int64_t) { return supply; }, noise_v) {
    supply = truth;
    bus.attach(0x40, sim);
    bus.spend = [this](int64_t ns) { clock.advance_ns(ns); };
  }
  FakeClock clock;
  SupplyState supply;
  SimI2cBus bus;
  SimIna2xx sim;
};

Ina2xxConfig config(Ina2xxChip chip, double shunt_ohm, double max_a) {
  Ina2xxConfig c;
  c.chip = chip;
  c.shunt_ohm = shunt_ohm;
  c.max_current_a = max_a;
  return c;
}

TEST(Ina2xxCalibration, MatchesTheDatasheetFormulaForEveryShuntAndCurrent) {
  struct Case {
    Ina2xxChip chip;
    double shunt_ohm, max_a, scale;
    uint16_t mask;
  };
  for (const Case& k : {Case{Ina2xxChip::kIna219, 0.1, 3.2, 0.04096, 0xFFFE},
                        Case{Ina2xxChip::kIna219, 0.05, 3.2768, 0.04096, 0xFFFE},
                        Case{Ina2xxChip::kIna219, 1.0, 0.3, 0.04096, 0xFFFE},
                        Case{Ina2xxChip::kIna219, 0.02, 15.0, 0.04096, 0xFFFE},
                        Case{Ina2xxChip::kIna219, 0.01, 4.0, 0.04096, 0xFFFE},
                        Case{Ina2xxChip::kIna226, 0.002, 10.0, 0.00512, 0x7FFF},
                        Case{Ina2xxChip::kIna226, 0.1, 0.8, 0.00512, 0x7FFF},
                        Case{Ina2xxChip::kIna226, 0.01, 8.0, 0.00512, 0x7FFF}}) {
    auto c = config(k.chip, k.shunt_ohm, k.max_a);
    if (k.chip == Ina2xxChip::kIna219) c.shunt_range_v = 0.32;
    const Ina2xxSetup s = ina2xx_setup(c);
    const double lsb = k.max_a / 32768;
    const auto expected = static_cast<uint16_t>(static_cast<uint32_t>(std::trunc(k.scale / (lsb * k.shunt_ohm))) & k.mask);
    SCOPED_TRACE(std::string(to_string(k.chip)) + " " + std::to_string(k.shunt_ohm) + " ohm " +
                 std::to_string(k.max_a) + " A");
    EXPECT_EQ(s.calibration, expected);
    EXPECT_NEAR(s.current_lsb_a, k.scale / (expected * k.shunt_ohm), 1e-15);
    EXPECT_GE(s.current_lsb_a, lsb * (1 - 1e-12));  // never finer than asked: max fits
    EXPECT_DOUBLE_EQ(s.power_lsb_w, (k.chip == Ina2xxChip::kIna219 ? 20 : 25) * s.current_lsb_a);
  }
  // The INA219 datasheet's example: 0.1 ohm, 2 A expected, the LSB rounded up to 100 uA ->
  // calibration 4096.
  auto example = config(Ina2xxChip::kIna219, 0.1, 2.0);
  example.current_lsb_a = 100e-6;
  EXPECT_EQ(ina2xx_setup(example).calibration, 4096);
  example.current_lsb_a = 50e-6;  // finer than 2 A / 2^15 allows
  EXPECT_THROW(ina2xx_setup(example), InputError);
  // The INA260 has fixed LSBs and no calibration.
  const Ina2xxSetup s260 = ina2xx_setup(config(Ina2xxChip::kIna260, 0, 10));
  EXPECT_EQ(s260.calibration, 0);
  EXPECT_DOUBLE_EQ(s260.current_lsb_a, 1.25e-3);
  EXPECT_DOUBLE_EQ(s260.power_lsb_w, 10e-3);
}

TEST(Ina2xxCalibration, ImpossibleSettingsAreRefusedNamingWhatIsWrong) {
  auto c = config(Ina2xxChip::kIna219, 0.1, 5.0);  // 500 mV across the shunt
  try {
    ina2xx_setup(c);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("beyond the shunt range of 320 mV"), std::string::npos) << e.what();
  }
  c = config(Ina2xxChip::kIna219, 0.1, 1.0);
  c.adc_bits = 13;
  EXPECT_THROW(ina2xx_setup(c), InputError);
  c = config(Ina2xxChip::kIna226, 0.1, 0.5);
  c.averages = 3;
  EXPECT_THROW(ina2xx_setup(c), InputError);
  c = config(Ina2xxChip::kIna226, 0.1, 0.5);
  c.conversion_time_s = 1e-3;
  EXPECT_THROW(ina2xx_setup(c), InputError);
  EXPECT_THROW(ina2xx_setup(config(Ina2xxChip::kIna260, 0, 20)), InputError);
  EXPECT_THROW(ina2xx_setup(config(Ina2xxChip::kIna219, 100, 1e-6)), InputError);  // cal < 2
}

// Readings against the simulated truth: bus within one LSB, current within one current LSB
// (plus the shunt register's own half LSB), power within the chip's truncations.
TEST(Ina2xxDriver, ReadingsAreWithinOneLsbOfTheTruthAcrossRanges) {
  struct Case {
    Ina2xxChip chip;
    double shunt_ohm, max_a, shunt_range_v;
    int bus_range_v;
    SupplyState truth;
  };
  for (const Case& k : {Case{Ina2xxChip::kIna219, 0.1, 0.4, 0.04, 16, {5.02, 0.3137}},
                        Case{Ina2xxChip::kIna219, 0.1, 0.8, 0.08, 16, {12.345, 0.6712}},
                        Case{Ina2xxChip::kIna219, 0.1, 1.6, 0.16, 32, {19.5, 1.234}},
                        Case{Ina2xxChip::kIna219, 0.1, 3.2, 0.32, 32, {24.0, 2.9876}},
                        Case{Ina2xxChip::kIna219, 1.0, 0.3, 0.32, 16, {3.3, 0.0123}},
                        Case{Ina2xxChip::kIna226, 0.01, 8.0, 0, 0, {36.2, 7.5}},
                        Case{Ina2xxChip::kIna226, 0.1, 0.8, 0, 0, {5.1, 0.0421}},
                        Case{Ina2xxChip::kIna260, 0, 15, 0, 0, {12.0, 3.21}}}) {
    Bench b(k.chip, k.shunt_ohm, k.truth);
    auto c = config(k.chip, k.shunt_ohm, k.max_a);
    if (k.chip == Ina2xxChip::kIna219) {
      c.shunt_range_v = k.shunt_range_v;
      c.bus_range_v = k.bus_range_v;
    }
    Ina2xx ina(b.bus, c, b.clock);
    ina.configure();
    SCOPED_TRACE(std::string(to_string(k.chip)) + " range " + std::to_string(k.shunt_range_v));
    const Ina2xxSpec& spec = ina2xx_spec(k.chip);
    const double shunt_lsb_a = spec.shunt_lsb_v > 0 ? spec.shunt_lsb_v / k.shunt_ohm : 0;
    for (int i = 0; i < 5; ++i) {
      const PowerSample s = ina.read_next();
      EXPECT_EQ(s.flags, kSampleOk);
      EXPECT_NEAR(s.bus_uv * 1e-6, k.truth.bus_v, spec.bus_lsb_v);
      const double i_lsb = ina.setup().current_lsb_a;
      EXPECT_NEAR(s.current_ua * 1e-6, k.truth.current_a, i_lsb + shunt_lsb_a / 2 + 1e-7);
      const double p_true = k.truth.bus_v * k.truth.current_a;
      EXPECT_NEAR(s.power_uw * 1e-6, p_true,
                  ina.setup().power_lsb_w + (i_lsb + shunt_lsb_a) * k.truth.bus_v + 1e-6);
    }
  }
}

TEST(Ina2xxDriver, CurrentBeyondTheShuntRangeIsFlaggedNotSilentlyClipped) {
  for (Ina2xxChip chip : {Ina2xxChip::kIna219, Ina2xxChip::kIna226, Ina2xxChip::kIna260}) {
    const double shunt = chip == Ina2xxChip::kIna260 ? 0 : 0.1;
    const double max_a = chip == Ina2xxChip::kIna226 ? 0.8 : chip == Ina2xxChip::kIna260 ? 15 : 3.2;
    Bench b(chip, shunt, {5.0, 0.5 * max_a});
    Ina2xx ina(b.bus, config(chip, shunt, max_a), b.clock);
    ina.configure();
    EXPECT_EQ(ina.read_next().flags, kSampleOk) << to_string(chip);
    b.supply.current_a = 3 * max_a;  // a short on the rail
    ina.read_next();                 // the conversion under way may predate it
    const PowerSample s = ina.read_next();
    EXPECT_NE(s.flags & kSampleOverflow, 0) << to_string(chip) << " reads " << s.current_ua << " uA";
  }
}

// The sampling loop keeps up with the chip without spinning: one sleep per conversion, the
// ready flag rarely found clear, at least 95 % of the conversions read.
TEST(Ina2xxDriver, TheSamplingLoopReachesTheChipsConversionRateWithoutSpinning) {
  for (Ina2xxChip chip : {Ina2xxChip::kIna219, Ina2xxChip::kIna226}) {
    Bench b(chip, 0.1, {5.0, 0.2});
    auto c = config(chip, 0.1, chip == Ina2xxChip::kIna219 ? 3.2 : 0.8);
    // INA226 at 588 us a channel: 1.18 ms a sample, as the INA219's 12 bits take 1.06 ms.
    // (Its fastest, 280 us a sample, is shorter than reading four registers at 400 kHz.)
    c.conversion_time_s = 588e-6;
    Ina2xx ina(b.bus, c, b.clock);
    ina.configure();
    const int64_t start = b.clock.now_ns();
    const uint64_t conversions_before = b.sim.conversions();
    const int64_t sleeps_before = b.clock.sleeps();
    int samples = 0;
    while (b.clock.now_ns() - start < 2'000'000'000) {
      ina.read_next();
      ++samples;
    }
    const double period = ina.setup().sample_period_s;
    const double expected = 2.0 / period;
    SCOPED_TRACE(std::string(to_string(chip)) + ": " + std::to_string(samples) + " samples, " +
                 std::to_string(expected) + " expected");
    std::printf("%s: %d samples in 2 s = %.1f %% of the chip's rate; %.2f sleeps and %.2f "
                "not-ready polls a sample\n",
                std::string(to_string(chip)).c_str(), samples, 100 * samples / expected,
                static_cast<double>(b.clock.sleeps() - sleeps_before) / samples,
                static_cast<double>(ina.not_ready_polls()) / samples);
    EXPECT_GE(samples, 0.95 * expected);
    EXPECT_GE(samples, 0.95 * static_cast<double>(b.sim.conversions() - conversions_before));
    EXPECT_LE(static_cast<double>(b.clock.sleeps() - sleeps_before), 2.5 * samples);
    EXPECT_LE(static_cast<double>(ina.not_ready_polls()), 1.5 * samples);
  }
}

TEST(Ina2xxDriver, AWrongOrMissingChipIsRefusedNamingTheAddress) {
  Bench b(Ina2xxChip::kIna219, 0.1, {5.0, 0.1});
  Ina2xx wrong(b.bus, config(Ina2xxChip::kIna226, 0.1, 0.8), b.clock);
  try {
    wrong.configure();
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("is not an ina226"), std::string::npos) << e.what();
  }
  auto absent = config(Ina2xxChip::kIna219, 0.1, 3.2);
  absent.address = 0x45;
  Ina2xx none(b.bus, absent, b.clock);
  try {
    none.configure();
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("0x45 on sim-i2c"), std::string::npos) << e.what();
  }
}

TEST(Ina2xxDriver, AFailedTransactionThrowsAndTheNextReadRecovers) {
  Bench b(Ina2xxChip::kIna219, 0.1, {5.0, 0.25});
  Ina2xx ina(b.bus, config(Ina2xxChip::kIna219, 0.1, 3.2), b.clock);
  ina.configure();
  ina.read_next();
  b.bus.fail_next(1);
  EXPECT_THROW(ina.read_next(), DeviceError);
  const PowerSample s = ina.read_next();
  EXPECT_NEAR(s.current_ua, 250'000, 200);
}

TEST(Ina2xxDriver, TriggeredModeConvertsOncePerTrigger) {
  Bench b(Ina2xxChip::kIna226, 0.1, {5.0, 0.3});
  auto c = config(Ina2xxChip::kIna226, 0.1, 0.8);
  c.triggered = true;
  Ina2xx ina(b.bus, c, b.clock);
  ina.configure();
  ina.read_next();  // the conversion the configuration started
  const uint64_t before = b.sim.conversions();
  b.clock.advance_ns(50'000'000);
  EXPECT_EQ(b.sim.conversions(), before) << "no trigger, no conversion";
  ina.trigger();
  const PowerSample s = ina.read_next();
  EXPECT_EQ(b.sim.conversions(), before + 1);
  EXPECT_NEAR(s.current_ua, 300'000, 100);
}

}  // namespace
}  // namespace ergon::probes
