// The INA219 modelled inside the MPS2 AN386 image (QEMU has no power monitor) against the
// project's own INA219 arithmetic (probes::ina2xx_convert) and simulated chip
// (probes::SimIna2xx): the firmware's driver must read the same samples from both.

#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>

#include "devices/board_profile.h"
#include "devices/cortexm/host/host_hal.h"
#include "devices/cortexm/ina219.h"
#include "devices/cortexm/targets/mps2_an386/modelled_ina219.h"
#include "probes/ina2xx.h"
#include "probes/sim_ina2xx.h"
#include "tests/support/fake_clock.h"

namespace ergon::devices::cortexm {
namespace {

constexpr uint64_t kTickHz = 25'000'000;  // the AN386 timer's

class ManualTicks final : public TickClock {
 public:
  uint64_t now_ticks() override { return ticks; }
  [[nodiscard]] uint64_t tick_hz() const override { return kTickHz; }
  uint64_t ticks = 0;
};

ModelledSupply truth_of(void* supply) { return *static_cast<ModelledSupply*>(supply); }

/// The target's I2C master: the model at 0x40, nothing else answers.
class ModelBus final : public I2cMaster {
 public:
  explicit ModelBus(ModelledIna219& chip) : chip_(chip) {}
  bool transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx, std::size_t rx_n) override {
    if (address != 0x40) return false;
    chip_.on_write(tx, tx_n);
    if (rx_n > 0) chip_.on_read(rx, rx_n);
    return true;
  }

 private:
  ModelledIna219& chip_;
};

uint16_t read_register(ModelledIna219& chip, uint8_t reg) {
  chip.on_write(&reg, 1);
  uint8_t b[2] = {};
  chip.on_read(b, 2);
  return static_cast<uint16_t>(b[0] << 8 | b[1]);
}

void write_register(ModelledIna219& chip, uint8_t reg, uint16_t value) {
  const uint8_t b[3] = {reg, static_cast<uint8_t>(value >> 8), static_cast<uint8_t>(value)};
  chip.on_write(b, 3);
}

TEST(ModelledIna219, ConvertsWithTheProjectsIna219Arithmetic) {
  // Values away from half-LSB boundaries, where double and integer rounding could differ:
  // negative, idle, computing, paging currents and ones that saturate the shunt or overflow
  // the current register; bus voltages within and beyond each range.
  const int32_t currents_na[] = {-71'234'567, -1'234, 0, 601'234, 3'901'234, 100'712'345, 250'004'321, 399'996'789};
  const uint32_t buses_uv[] = {0, 3'296'123, 3'299'997, 12'001'234, 20'001'234, 35'001'234};
  const uint16_t calibrations[] = {4096, 4104, 20480, 1000};
  int compared = 0;
  for (uint32_t brng = 0; brng < 2; ++brng)
    for (uint32_t pg = 0; pg < 4; ++pg)
      for (uint16_t cal : calibrations)
        for (int32_t current : currents_na)
          for (uint32_t bus : buses_uv) {
            ManualTicks clock;
            ModelledSupply supply{.bus_uv = bus, .current_na = current};
            ModelledIna219 chip(clock, 1000, 0, truth_of, &supply);
            const auto config = static_cast<uint16_t>(brng << 13 | pg << 11 | 0x3U << 7 | 0x3U << 3 | 0x7U);
            write_register(chip, 5, cal);
            write_register(chip, 0, config);
            clock.ticks += 1064 * kTickHz / 1'000'000 + 1;
            const uint16_t bus_reg = read_register(chip, 2);
            const probes::Ina2xxRegisters want =
                probes::ina2xx_convert(probes::Ina2xxChip::kIna219, config, cal, 1.0, bus * 1e-6, current * 1e-9, 0);
            SCOPED_TRACE(::testing::Message() << "config " << config << " cal " << cal << " current " << current
                                            << " nA, bus " << bus << " uV");
            ASSERT_TRUE(bus_reg & 2U) << "a conversion completed (CNVR)";
            EXPECT_EQ(bus_reg & ~3U, want.bus);
            EXPECT_EQ((bus_reg & 1U) != 0, want.overflow);
            EXPECT_EQ(read_register(chip, 1), want.shunt);
            EXPECT_EQ(read_register(chip, 4), want.current);
            EXPECT_EQ(read_register(chip, 3), want.power);
            EXPECT_EQ(read_register(chip, 2) & 2U, 0U) << "reading power clears CNVR";
            EXPECT_EQ(read_register(chip, 5), cal);
            EXPECT_EQ(read_register(chip, 0), config);
            ++compared;
          }
  EXPECT_EQ(compared, 2 * 4 * 4 * 8 * 6);
}

TEST(ModelledIna219, ConvertsOnTheChipsScheduleAndResets) {
  ManualTicks clock;
  ModelledSupply supply{.bus_uv = 3'300'000, .current_na = 600'000};
  ModelledIna219 chip(clock, 1000, 0, truth_of, &supply);
  EXPECT_EQ(read_register(chip, 0), 0x399F) << "the reset configuration";
  write_register(chip, 5, 4096);
  write_register(chip, 0, 0x399F);  // 12-bit shunt and bus, continuous: 1.064 ms a conversion
  clock.ticks += 1063 * kTickHz / 1'000'000;
  EXPECT_EQ(read_register(chip, 2) & 2U, 0U) << "not yet";
  clock.ticks += 2 * kTickHz / 1'000'000;
  EXPECT_NE(read_register(chip, 2) & 2U, 0U);
  EXPECT_EQ(chip.conversions(), 1U);
  clock.ticks += 10 * 1064 * kTickHz / 1'000'000;
  read_register(chip, 2);
  EXPECT_EQ(chip.conversions(), 11U) << "conversions nobody read are overwritten, as on the chip";
  write_register(chip, 0, 0x399B);  // triggered: one conversion
  clock.ticks += 1065 * kTickHz / 1'000'000;
  EXPECT_NE(read_register(chip, 2) & 2U, 0U);
  read_register(chip, 3);
  clock.ticks += 5 * 1064 * kTickHz / 1'000'000;
  EXPECT_EQ(read_register(chip, 2) & 2U, 0U) << "one conversion per trigger";
  write_register(chip, 0, 0x8000);
  EXPECT_EQ(read_register(chip, 0), 0x399F);
  EXPECT_EQ(read_register(chip, 5), 0) << "a reset clears the calibration";
}

TEST(ModelledIna219, TheSupplyModelIsTheBoardProfiles) {
  const BoardProfile nrf = board_named("nrf52840");
  for (double w : {nrf.idle_w, nrf.idle_w + nrf.compute_w, nrf.idle_w + nrf.storage_w}) {
    const SupplyReading want = supply_reading(nrf, w);
    const ModelledSupply got = supply_at(static_cast<uint64_t>(w * 1e6 + 0.5), 3'300'000, 50);
    EXPECT_NEAR(got.bus_uv, want.bus_v * 1e6, 1);
    EXPECT_NEAR(got.current_na, want.current_a * 1e9, 2);
  }
}

TEST(ModelledIna219, TheFirmwaresDriverReadsWhatItReadsFromTheSimulatedChip) {
  // The same supply through the modelled chip and through probes::SimIna2xx on a simulated
  // bus (the host HAL's), both without noise, read by the firmware's driver in lockstep.
  for (const ModelledSupply truth : {supply_at(1980, 3'300'000, 50), supply_at(12'870, 3'300'000, 50),
                                     supply_at(331'980, 3'300'000, 50)}) {
    ManualTicks ticks;
    ModelledSupply supply = truth;
    ModelledIna219 model(ticks, 1000, 0, truth_of, &supply);
    ModelBus model_bus(model);
    testing::FakeClock clock;
    clock.set_ns(0);
    probes::SimIna2xx sim(probes::Ina2xxChip::kIna219, 1.0, [&](int64_t) {
      return probes::SupplyState{.bus_v = truth.bus_uv * 1e-6, .current_a = truth.current_na * 1e-9};
    });
    probes::SimI2cBus bus(clock);
    bus.attach(0x40, sim);
    HostI2c sim_bus(bus);
    const Ina219Config config{.address = 0x40, .shunt_milliohm = 1000, .max_current_ma = 327};
    Ina219 on_model(&model_bus, config), on_sim(&sim_bus, config);
    ASSERT_TRUE(on_model.start());
    ASSERT_TRUE(on_sim.start());
    int samples = 0;
    for (int step = 0; step < 200; ++step) {
      ticks.ticks += 250 * kTickHz / 1'000'000;  // the driver looks every 250 us
      clock.advance_ns(250'000);
      Ina219Sample a, b;
      const bool got_a = on_model.read(a), got_b = on_sim.read(b);
      ASSERT_EQ(got_a, got_b) << "step " << step;
      if (!got_a) continue;
      ++samples;
      EXPECT_EQ(a.bus_uv, b.bus_uv);
      EXPECT_EQ(a.current_ua, b.current_ua);
      EXPECT_EQ(a.power_uw, b.power_uw);
      EXPECT_EQ(a.flags, b.flags);
    }
    EXPECT_EQ(samples, 200 * 250 / 1064) << "one sample a conversion";
    Ina219 absent(&model_bus, Ina219Config{.address = 0x41});
    EXPECT_FALSE(absent.start()) << "nothing answers at 0x41";
  }
}

TEST(ModelledIna219, NoiseHasTheGivenSpread) {
  ManualTicks clock;
  ModelledSupply supply{.bus_uv = 3'300'000, .current_na = 600'000};
  ModelledIna219 chip(clock, 1000, 10'000, truth_of, &supply);  // 10 uV, 1 LSB
  write_register(chip, 5, 4096);
  write_register(chip, 0, 0x399F);
  double sum = 0, sum2 = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    clock.ticks += 1064 * kTickHz / 1'000'000 + 1;
    const auto shunt = static_cast<int16_t>(read_register(chip, 1));
    read_register(chip, 3);
    sum += shunt;
    sum2 += static_cast<double>(shunt) * shunt;
  }
  const double mean = sum / n, sigma = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 60, 0.1);
  EXPECT_NEAR(sigma, std::sqrt(1 + 1.0 / 12), 0.1) << "1 LSB of noise and the quantization's";
}

}  // namespace
}  // namespace ergon::devices::cortexm
