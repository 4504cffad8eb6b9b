#include "probes/tegrastats_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error.h"

namespace ergon::probes {
namespace {

const std::string kFake = std::string(ERGON_TEST_DATA_DIR) + "/tegrastats/fake_tegrastats.sh";

TEST(TegrastatsProbe, ReadsEachLineAsOneSamplePerRailWithTheInputRailFirst) {
  const SteadyClock clock;
  auto probe = open_tegrastats(kFake, 20, clock);
  probe->start();
  const auto& channels = probe->info().channels;
  ASSERT_EQ(channels.size(), 6U);
  EXPECT_EQ(channels[0].name, "VDD_IN");
  EXPECT_DOUBLE_EQ(probe->info().max_rate_hz, 50);
  std::vector<PowerSample> samples;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(probe->read(samples), 6U);
  std::vector<int32_t> input;
  for (const auto& s : samples)
    if (s.rail == 0) input.push_back(s.power_uw);
  ASSERT_EQ(input.size(), 4U);
  EXPECT_EQ(input[0], 2'143'000);  // the recorded TX2 lines, in turn
  EXPECT_EQ(input[1], 3'521'000);
  EXPECT_EQ(input[2], 2'143'000);
  EXPECT_GT(samples.back().t_ticks, samples.front().t_ticks);
  probe->stop();
}

TEST(TegrastatsProbe, AnAgxXavierHasNoInputRailSoItsTotalIsUnknownNotARail) {
  const SteadyClock clock;
  ::setenv("FAKE_TEGRASTATS_FILE", "agx_xavier_l4t31.txt", 1);
  auto probe = open_tegrastats(kFake, 20, clock);
  probe->start();
  ::unsetenv("FAKE_TEGRASTATS_FILE");
  EXPECT_FALSE(probe->info().total_known);
  ASSERT_EQ(probe->info().channels.size(), 6U);
  EXPECT_EQ(probe->info().channels[0].name, "GPU");
  std::vector<PowerSample> samples;
  EXPECT_EQ(probe->read(samples), 6U);
  probe->stop();
}

TEST(TegrastatsProbe, AProgramThatDiesOrIsMissingIsOneClearError) {
  const SteadyClock clock;
  ::setenv("FAKE_TEGRASTATS_LINES", "2", 1);
  auto dying = open_tegrastats(kFake, 10, clock);
  dying->start();
  std::vector<PowerSample> samples;
  try {
    for (int i = 0; i < 5; ++i) dying->read(samples);
    ADD_FAILURE() << "the program exited";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 3: tegrastats: simulated failure"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("FAKE_TEGRASTATS_LINES");
  auto missing = open_tegrastats("no-such-tegrastats-here", 100, clock);
  try {
    missing->start();
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("ships with L4T"), std::string::npos) << e.what();
  }
  EXPECT_THROW(open_tegrastats(kFake, 0, clock), InputError);
}

}  // namespace
}  // namespace ergon::probes
