// The sigrok probe through the real libsigrok and its `demo` driver (no mock): the demo's A0 is
// a square wave and A1 a sine of 20 samples a period, both of amplitude 10, paced by the wall
// clock at the rate asked.
#include "probes/sigrok_probe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "common/clock.h"
#include "common/error.h"

namespace ergon::probes {
namespace {

std::vector<PowerSample> read_at_least(Probe& probe, std::size_t n) {
  std::vector<PowerSample> samples;
  probe.start();
  while (samples.size() < n) probe.read(samples);
  probe.stop();
  return samples;
}

TEST(SigrokProbe, TheDemoDriversChannelsBecomeVoltsAmperesAndTheirProduct) {
  SteadyClock clock;
  auto probe = open_probe(parse_probe_spec("sigrok:demo,voltage=A0,current=A1,rate=2000,rail=VIN"), 0, clock);
  EXPECT_EQ(probe->info().kind, "sigrok");
  EXPECT_EQ(probe->info().location, "demo");
  ASSERT_EQ(probe->info().channels.size(), 1U);
  EXPECT_EQ(probe->info().channels[0].name, "VIN");
  EXPECT_DOUBLE_EQ(probe->info().max_rate_hz, 2000);

  const auto samples = read_at_least(*probe, 400);
  // A1 is the demo's sine: 10 sin(2 pi k / 20) from some phase on.
  int phase = -1;
  for (int p = 0; p < 20 && phase < 0; ++p) {
    bool fits = true;
    for (std::size_t k = 0; k < 40 && fits; ++k)
      fits = std::abs(samples[k].current_ua * 1e-6 - 10 * std::sin(2 * std::numbers::pi * double(k + p) / 20)) < 1e-3;
    if (fits) phase = p;
  }
  ASSERT_GE(phase, 0) << "A1 is not the demo's sine";
  for (std::size_t k = 0; k < samples.size(); ++k) {
    const auto& s = samples[k];
    const double expected_a = 10 * std::sin(2 * std::numbers::pi * double(k + phase) / 20);
    ASSERT_NEAR(s.current_ua * 1e-6, expected_a, 1e-3) << "sample " << k;
    ASSERT_NEAR(std::abs(s.bus_uv * 1e-6), 10, 1e-3) << "A0 is the demo's square, +-10";
    ASSERT_NEAR(s.power_uw * 1e-6, s.bus_uv * 1e-6 * s.current_ua * 1e-6, 1e-3);
    if (k > 0) {
      ASSERT_GE(s.t_ticks, samples[k - 1].t_ticks);
    }
  }
  // Paced at 2 kHz: the samples span about their count / 2000 s of host time.
  const double span_s = double(samples.back().t_ticks - samples.front().t_ticks) * 1e-9;
  EXPECT_NEAR(span_s, double(samples.size() - 1) / 2000, 0.1);  // packets stamped on arrival: a loaded host delays some
}

TEST(SigrokProbe, AnUnknownDriverOrChannelIsOneLineNamingWhatExists) {
  SteadyClock clock;
  try {
    open_probe(parse_probe_spec("sigrok:nosuch"), 0, clock);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("libsigrok has no driver 'nosuch' (sigrok-cli -L lists them: "),
              std::string::npos)
        << e.what();
  }
  try {
    open_probe(parse_probe_spec("sigrok:demo,current=Z9"), 0, clock);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "probe 'sigrok:demo,current=Z9': the device has no analog channel 'Z9' (it has A0, A1, A2, A3, A4)");
  }
  EXPECT_THROW(parse_probe_spec("sigrok:demo,rate=fast"), InputError);
  EXPECT_THROW(parse_probe_spec("sigrok:demo,shunt=0.1"), InputError);
  const auto spec = parse_probe_spec("sigrok:rdtech-um@/dev/ttyUSB0,voltage=V,current=I");
  EXPECT_EQ(spec.bus, "rdtech-um");
  EXPECT_EQ(spec.options.at("conn"), "/dev/ttyUSB0");
  EXPECT_EQ(spec.options.at("current"), "I");
}

}  // namespace
}  // namespace ergon::probes
