// Labelled `hardware`: runs only with ERGON_HARDWARE_TESTS=1 (scripts/test.sh) and a probe
// named in ERGON_PROBE, e.g. ERGON_PROBE=ina219:/dev/i2c-1@0x40,shunt=0.1 on a Raspberry Pi
// with the chip wired, or ERGON_PROBE=tegrastats on a Jetson.

#include <gtest/gtest.h>

#include <cstdlib>

#include "probes/probe.h"

namespace ergon::probes {
namespace {

TEST(RealProbe, SamplesNearItsRateForTwoSecondsWithoutErrors) {
  const char* spec = std::getenv("ERGON_PROBE");
  if (spec == nullptr) GTEST_SKIP() << "set ERGON_PROBE to the probe wired to this machine";
  const SteadyClock clock;
  auto probe = open_probe(parse_probe_spec(spec), 0, clock);
  probe->start();
  std::vector<PowerSample> samples;
  const int64_t start = clock.now_ns();
  int readings = 0;
  while (clock.now_ns() - start < 2'000'000'000) {
    probe->read(samples);
    ++readings;
  }
  probe->stop();
  const double rate = readings / 2.0;
  std::printf("%s (%s): %.1f readings/s of %.1f; %llu read errors\n", spec, probe->info().location.c_str(), rate,
              probe->info().max_rate_hz, static_cast<unsigned long long>(probe->read_errors()));
  EXPECT_GE(rate, 0.9 * probe->info().max_rate_hz);
  EXPECT_EQ(probe->read_errors(), 0U);
  for (const auto& s : samples) EXPECT_GE(s.power_uw, 0);
}

}  // namespace
}  // namespace ergon::probes
