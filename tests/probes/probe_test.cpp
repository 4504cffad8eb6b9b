#include "probes/probe.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/support/fake_clock.h"
#include "common/error.h"

namespace ergon::probes {
namespace {

TEST(ProbeSpec, NamesTheBusAddressAndSettings) {
  const ProbeSpec s = parse_probe_spec("ina219:/dev/i2c-1@0x41,shunt=0.05, max=2");
  EXPECT_EQ(s.kind, "ina219");
  EXPECT_EQ(s.bus, "/dev/i2c-1");
  EXPECT_EQ(s.address, 0x41);
  EXPECT_EQ(s.options.at("shunt"), "0.05");
  EXPECT_EQ(s.options.at("max"), "2");
  EXPECT_EQ(parse_probe_spec("ina226:/dev/i2c-0").address, 0x40);
  EXPECT_EQ(parse_probe_spec("ina260:/dev/i2c-3@68").address, 68);
  EXPECT_EQ(parse_probe_spec("sim:ina226,current=0.2").options.at("chip"), "ina226");
  EXPECT_EQ(parse_probe_spec("tegrastats").bus, "tegrastats");
  EXPECT_EQ(parse_probe_spec("tegrastats,interval=50").options.at("interval"), "50");
  EXPECT_EQ(parse_probe_spec("tegrastats:/opt/bin/tegrastats").bus, "/opt/bin/tegrastats");
  EXPECT_EQ(parse_probe_spec("rapl").kind, "rapl");
  EXPECT_EQ(parse_probe_spec("ina3221:/sys/class/hwmon/hwmon2").bus, "/sys/class/hwmon/hwmon2");
}

TEST(ProbeSpec, EveryMistakeGetsOneLineNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {"ina219", "no KIND: prefix"},
      {"ina999:/dev/i2c-1", "unknown kind 'ina999'"},
      {"ina219:@0x40", "no I2C bus"},
      {"ina219:/dev/i2c-1@0x80", "not a 7-bit I2C address"},
      {"ina219:/dev/i2c-1@zz", "not a 7-bit I2C address"},
      {"ina219:/dev/i2c-1,shunt", "is not key=value"},
      {"ina219:/dev/i2c-1,shunt=abc", "option shunt needs a number"},
      {"ina219:/dev/i2c-1,colour=red", "unknown option 'colour'"},
      {"sim:ina999", "sim: needs a chip"},
  };
  for (const auto& [text, why] : cases) {
    try {
      parse_probe_spec(text);
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

TEST(ProbeSpec, MutatedSpecsParseOrFailCleanly) {
  const std::string seeds[] = {"ina219:/dev/i2c-1@0x40,shunt=0.1,max=3.2", "sim:ina226,current=0.5",
                               "tegrastats,interval=50", "rapl", "ina3221:/sys/class/hwmon/hwmon1"};
  std::mt19937 rng(7);
  int parsed = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[i % 5];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const std::size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.erase(at, 1); break;
        default: s.insert(at, 1, ",=:@x0"[rng() % 6]); break;
      }
    }
    try {
      const ProbeSpec spec = parse_probe_spec(s);
      ++parsed;
      EXPECT_FALSE(spec.kind.empty()) << s;
      EXPECT_EQ(spec.text, s);
    } catch (const InputError& e) {
      ++refused;
      const std::string what = e.what();
      EXPECT_FALSE(what.empty());
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  // Both outcomes happen: the edits neither break every spec nor leave all of them valid.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(refused, 0);
}

TEST(Probe, ASimulatedChipReadsItsSupplyThroughTheDriver) {
  ergon::testing::FakeClock clock;
  auto probe = open_probe(parse_probe_spec("sim:ina219,current=0.75,bus=5,noise=0"), 0, clock);
  EXPECT_EQ(probe->info().kind, "ina219");
  EXPECT_NEAR(probe->info().max_rate_hz, 1 / 1.064e-3, 1);
  probe->start();
  std::vector<PowerSample> samples;
  for (int i = 0; i < 10; ++i) probe->read(samples);
  ASSERT_EQ(samples.size(), 10U);
  for (const auto& s : samples) {
    EXPECT_NEAR(s.power_uw * 1e-6, 3.75, 0.01);
    EXPECT_EQ(s.flags, kSampleOk);
  }
  // A slower rate averages more: the INA226 at 100/s converts at most every 10 ms.
  auto slow = open_probe(parse_probe_spec("sim:ina226,current=0.1"), 100, clock);
  EXPECT_GE(slow->info().max_rate_hz, 100);
  EXPECT_LT(slow->info().max_rate_hz, 200);
  EXPECT_THROW(open_probe(parse_probe_spec("ina219:/dev/i2c-99"), 0, clock), DeviceError);
  EXPECT_THROW(open_probe(parse_probe_spec("sim:ina219,shunt=0.1,max=10"), 0, clock), InputError);
}

}  // namespace
}  // namespace ergon::probes
