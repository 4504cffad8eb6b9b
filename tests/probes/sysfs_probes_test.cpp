#include "probes/sysfs_probes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "tests/support/fake_clock.h"
#include "common/error.h"

namespace ergon::probes {
namespace {

namespace fs = std::filesystem;
using ergon::testing::FakeClock;

const fs::path kData = fs::path(ERGON_TEST_DATA_DIR) / "sysfs";

TEST(Ina3221, HwmonChipsAreFoundWithTheirRailLabelsAndRead) {
  const auto found = find_ina3221(kData / "orin");
  ASSERT_EQ(found.size(), 2U);  // two chips; the thermal hwmon is not one
  EXPECT_EQ(found[0].kind, "ina3221-hwmon");
  EXPECT_EQ(found[0].channels, (std::vector<std::string>{"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}));
  EXPECT_EQ(found[1].channels, (std::vector<std::string>{"VDDQ_VDD2_1V8AO"}));
  FakeClock clock;
  auto probe = open_ina3221(found[0], 0, clock);
  EXPECT_DOUBLE_EQ(probe->info().max_rate_hz, 10);  // update_interval 100 ms
  probe->start();
  std::vector<PowerSample> s;
  EXPECT_EQ(probe->read(s), 3U);
  EXPECT_EQ(s[0].bus_uv, 5'016'000);
  EXPECT_EQ(s[0].current_ua, 478'000);
  EXPECT_EQ(s[0].power_uw, 5016 * 478);  // hwmon has no power file: V x I
  EXPECT_EQ(s[2].rail, 2);
  const int64_t t0 = clock.now_ns();
  probe->read(s);
  EXPECT_EQ(clock.now_ns() - t0, 100'000'000);  // one update interval later
}

TEST(Ina3221, Tx2IioChipsGiveTheChipsOwnPower) {
  const auto found = find_ina3221(kData / "tx2");
  ASSERT_EQ(found.size(), 2U);
  EXPECT_EQ(found[1].kind, "ina3221-iio");
  EXPECT_EQ(found[1].channels.front(), "VDD_IN");
  FakeClock clock;
  auto probe = open_ina3221(found[1], 0.05, clock);
  probe->start();
  std::vector<PowerSample> s;
  probe->read(s);
  ASSERT_EQ(s.size(), 3U);
  EXPECT_EQ(s[0].power_uw, 2'143'000);
  EXPECT_EQ(s[0].bus_uv, 19'080'000);
  EXPECT_TRUE(probe->info().total_known);
  EXPECT_TRUE(find_ina3221(kData / "x86").empty());
}

// A TX2's first chip monitors the GPU, SoC and Wi-Fi rails; an AGX Orin's chips have no
// module-input rail at all. Channel 0 of either is a part of the board, not its power.
TEST(Ina3221, AChipWithoutTheModuleInputRailSaysItsTotalIsUnknown) {
  FakeClock clock;
  const auto tx2 = find_ina3221(kData / "tx2");
  EXPECT_FALSE(open_ina3221(tx2[0], 0.05, clock)->info().total_known) << tx2[0].channels.front();
  const auto orin = find_ina3221(kData / "orin");
  EXPECT_FALSE(open_ina3221(orin[0], 0, clock)->info().total_known);
}

class RaplTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ergon-rapl-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::copy(kData / "x86", root_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }
  void set_energy(const std::string& zone, int64_t uj) {
    std::ofstream(root_ / "sys/class/powercap" / zone / "energy_uj") << uj << "\n";
  }
  fs::path root_;
};

TEST_F(RaplTest, PowerIsTheEnergyCounterSlopeAcrossWraparound) {
  const auto zones = find_rapl(root_);
  ASSERT_EQ(zones.size(), 3U);
  EXPECT_EQ(zones[0].channels.front(), "package-0");
  EXPECT_EQ(zones[1].channels.front(), "core");
  FakeClock clock;
  auto probe = open_rapl(zones, 0.5, clock);
  probe->start();
  set_energy("intel-rapl:0", 1'000'000 + 7'500'000);  // 15 W over 0.5 s
  set_energy("intel-rapl:0:0", 500'000 + 2'500'000);
  set_energy("intel-rapl:1", 2'000'000 + 10'000'000);
  std::vector<PowerSample> s;
  const int64_t t0 = clock.now_ns();
  ASSERT_EQ(probe->read(s), 3U);
  EXPECT_EQ(s[0].power_uw, 15'000'000);
  EXPECT_EQ(s[0].t_ticks, static_cast<uint64_t>(t0 + 250'000'000));  // the interval's middle
  EXPECT_EQ(s[1].power_uw, 5'000'000);
  EXPECT_EQ(s[2].power_uw, 20'000'000);
  // The package counter wraps at max_energy_range_uj (262143328850).
  set_energy("intel-rapl:0", 262'143'328'850 - 1'000'000);
  probe->read(s);
  set_energy("intel-rapl:0", 3'999'999);  // 5 J later: 1 J to the top, 0 after it, 4 J more
  s.clear();
  probe->read(s);
  EXPECT_EQ(s[0].power_uw, 10'000'000);
}

TEST_F(RaplTest, AnUnreadableCounterSaysWhichFileAndWhy) {
  const auto zones = find_rapl(root_);
  FakeClock clock;
  EXPECT_THROW(open_rapl({}, 0.5, clock), DeviceError);
  // A counter that is not a number (here a directory in its place) names its file.
  const fs::path counter = root_ / "sys/class/powercap/intel-rapl:1/energy_uj";
  fs::remove(counter);
  fs::create_directory(counter);
  try {
    open_rapl(zones, 0.5, clock)->start();
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find(counter.string()), std::string::npos) << e.what();
  }
  // Without permission (root reads anything, so only when not root) the error says it is
  // root-only.
  fs::remove(counter);
  std::ofstream(counter) << "1\n";
  fs::permissions(root_ / "sys/class/powercap/intel-rapl:0/energy_uj", fs::perms::none);
  if (::geteuid() != 0) {
    try {
      open_rapl(zones, 0.5, clock)->start();
      ADD_FAILURE();
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("root-only"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ergon::probes
