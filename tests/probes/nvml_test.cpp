#include "probes/nvml.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/fake_clock.h"
#include "common/error.h"

namespace ergon::probes {
namespace {

TEST(Nvml, WithoutADriverTheMessageSaysNvmlIsNotAvailable) {
  try {
    Nvml::open("libnvidia-ml-that-is-not-here.so.1");
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("NVML is not available"), std::string::npos) << e.what();
  }
}

TEST(Nvml, ReadsPowerEnergyAndLimitsAndSetsALimitWithinRange) {
  auto nvml = Nvml::open(FAKE_NVML_LIBRARY);
  ASSERT_EQ(nvml->device_count(), 2U);
  EXPECT_EQ(nvml->name(1), "Fake H100 1");
  EXPECT_DOUBLE_EQ(nvml->power_limit_w(0), 700);
  EXPECT_DOUBLE_EQ(nvml->power_w(0), 450);
  EXPECT_GT(nvml->energy_j(0), 0);
  const auto [lo, hi] = nvml->power_limit_range_w(0);
  EXPECT_DOUBLE_EQ(lo, 200);
  EXPECT_DOUBLE_EQ(hi, 700);
  nvml->set_power_limit_w(0, 300);  // a cap below what the load wants
  EXPECT_DOUBLE_EQ(nvml->power_limit_w(0), 300);
  EXPECT_DOUBLE_EQ(nvml->power_w(0), 300);
  EXPECT_THROW(nvml->set_power_limit_w(0, 150), InputError);
  ::setenv("FAKE_NVML_DENY", "1", 1);
  try {
    nvml->set_power_limit_w(0, 400);
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("Insufficient Permissions (setting a power limit needs root"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("FAKE_NVML_DENY");
  nvml->set_power_limit_w(0, 700);
}

TEST(Nvml, TheProbeSamplesEveryGpuAtItsInterval) {
  ergon::testing::FakeClock clock;
  auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock);
  ASSERT_EQ(probe->info().channels.size(), 2U);
  probe->start();
  std::vector<PowerSample> s;
  const int64_t t0 = clock.now_ns();
  for (int i = 0; i < 3; ++i) probe->read(s);
  ASSERT_EQ(s.size(), 6U);
  EXPECT_EQ(s[1].rail, 1);
  EXPECT_EQ(s[0].power_uw, 450'000'000);
  EXPECT_EQ(clock.now_ns() - t0, 100'000'000);  // reads at 0, 50 and 100 ms
}

}  // namespace
}  // namespace ergon::probes
