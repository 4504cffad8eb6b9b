// The PPK2 driver against a real device's metadata (tests/data/ppk2) and against a simulated
// PPK2 on a pseudo-terminal that speaks the documented protocol.
#include "probes/ppk2.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "probes/sim_ppk2.h"

namespace ergon::probes {
namespace {

std::string real_metadata() {
  std::ifstream in(std::string(ERGON_TEST_DATA_DIR) + "/ppk2/metadata.txt");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Ppk2, ARealDevicesMetadataGivesItsCalibration) {
  const std::string text = real_metadata();
  const auto cal = parse_ppk2_metadata(text.substr(0, text.find("END")));
  EXPECT_DOUBLE_EQ(cal.r[0], 1003.3506);
  EXPECT_DOUBLE_EQ(cal.gs[1], 112.789);
  EXPECT_DOUBLE_EQ(cal.o[4], 87.2177);
  EXPECT_DOUBLE_EQ(cal.s[4], 0.002940743);
  EXPECT_DOUBLE_EQ(cal.i[3], -0.000374119);
  EXPECT_EQ(cal.vdd_mv, 3000);
  EXPECT_EQ(cal.mode, 2);
  EXPECT_EQ(cal.hw, 9173);
  // What the simulator answers reads back as the same calibration.
  const auto sim = SimPpk2::real_calibration();
  const std::string written = ppk2_metadata_text(sim);
  const auto back = parse_ppk2_metadata(written.substr(0, written.find("END")));
  for (std::size_t r = 0; r < 5; ++r) {
    EXPECT_DOUBLE_EQ(back.r[r], cal.r[r]);
    EXPECT_DOUBLE_EQ(back.gs[r], cal.gs[r]);
    EXPECT_DOUBLE_EQ(back.o[r], cal.o[r]);
    EXPECT_DOUBLE_EQ(back.s[r], cal.s[r]);
    EXPECT_DOUBLE_EQ(back.i[r], cal.i[r]);
  }
  EXPECT_THROW(parse_ppk2_metadata("R0: ten\n"), InputError);
}

TEST(Ppk2, ACorruptedMetadataAnswerIsRefusedInOnePrintableLineNamingTheKey) {
  // What a line corrupted on the wire may say (found by fuzz_ppk2_metadata): an infinite
  // constant, a regulator voltage the PPK2 cannot set, a mode it does not have, bytes that
  // are not text.
  auto refusal = [](const std::string& text) {
    try {
      (void)parse_ppk2_metadata(text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("GS1: inf\n"), "PPK2 metadata: GS1: expected a number, got 'inf'");
  const std::string huge = refusal("VDD: 1e300\n");
  EXPECT_EQ(huge, "PPK2 metadata: VDD: 1e+300 mV is not a whole number from 800 to 5000 mV");
  EXPECT_LT(huge.size(), 120U) << huge;
  EXPECT_NE(refusal("VDD: 6000\n").find("from 800 to 5000 mV"), std::string::npos);
  EXPECT_NE(refusal("mode: 7\n").find("mode: "), std::string::npos);
  const std::string garbled = refusal("R\xff\x01: 1.0\xfe" + std::string(200, '\xff') + "\n");
  EXPECT_NE(garbled.find("R\\xff\\x01: expected a number"), std::string::npos) << garbled;
  EXPECT_LT(garbled.size(), 200U);
  for (const char c : garbled) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << garbled;
}

TEST(Ppk2, ASampleDecodesToItsCurrentWithinOneStepOfItsRange) {
  const auto cal = SimPpk2::real_calibration();
  for (double amps : {2e-6, 150e-6, 3e-3, 40e-3, 0.5, 2.0}) {
    const uint32_t word = encode_ppk2_sample(amps, cal, 3300, 17, 0xA5);
    const Ppk2Sample s = decode_ppk2_sample(word);
    EXPECT_EQ(s.counter, 17);
    EXPECT_EQ(s.logic, 0xA5);
    // One ADC step (4 counts) of its range, in amperes, at most.
    const double decoded = ppk2_current_a(s, cal, 3300);
    const double step = std::abs(ppk2_current_a({s.adc + 4, s.range, 0, 0}, cal, 3300) - decoded);
    EXPECT_NEAR(decoded, amps, step) << amps << " A in range " << int(s.range);
  }
  EXPECT_LT(decode_ppk2_sample(encode_ppk2_sample(150e-6, cal, 3300, 0, 0)).range,
            decode_ppk2_sample(encode_ppk2_sample(0.5, cal, 3300, 0, 0)).range);
}

TEST(Ppk2, TheProbeSetsSourceModeAndKeepsEachWindowsMeanMinimumAndMaximum) {
  // 10 mA, with a 100 mA spike of 50 us every 5 ms; D0 high for the first 2 ms of each 5.
  const auto sample_of = [](double t) { return std::llround(t * kPpk2SampleRateHz); };
  SimPpk2 sim({.current_a = [&](double t) { return sample_of(t) % 500 < 5 ? 0.100 : 0.010; },
               .logic = [&](double t) { return static_cast<uint8_t>(sample_of(t) % 500 < 200 ? 1 : 0); }});
  sim.start();
  SteadyClock clock;
  auto probe = open_probe(parse_probe_spec("ppk2:" + sim.port() + ",mode=source,vdd=3300,rate=1000"), 0, clock);
  EXPECT_EQ(probe->info().kind, "ppk2");
  ASSERT_EQ(probe->info().channels.size(), 3U);
  EXPECT_EQ(probe->info().channels[2].name, "VOUT_max");
  std::vector<PowerSample> samples;
  std::vector<Ppk2Edge> edges;
  probe->start();
  while (samples.size() < 3 * 200) {
    probe->read(samples);
    const auto more = take_ppk2_edges(*probe);
    edges.insert(edges.end(), more.begin(), more.end());
  }
  probe->stop();
  EXPECT_EQ(sim.mode(), 2);
  EXPECT_EQ(sim.vdd_mv(), 3300);
  EXPECT_TRUE(sim.board_powered());
  EXPECT_EQ(probe->read_errors(), 0U);

  int spike_windows = 0;
  for (std::size_t k = 0; k + 2 < samples.size(); k += 3) {
    const auto& mean = samples[k];
    const auto& low = samples[k + 1];
    const auto& high = samples[k + 2];
    ASSERT_EQ(mean.rail, 0);
    ASSERT_EQ(high.rail, 2);
    EXPECT_EQ(mean.bus_uv, 3'300'000);
    EXPECT_NEAR(low.current_ua, 10'000, 60);
    const bool spike = high.current_ua > 50'000;
    spike_windows += spike ? 1 : 0;
    // A 1 ms window of 100 samples: 5 of them at 100 mA where the spike falls.
    EXPECT_NEAR(mean.current_ua, spike ? 14'500 : 10'000, 150) << "window " << k / 3;
    EXPECT_NEAR(mean.power_uw, mean.current_ua * 3.3, 5);
    if (spike) {
      EXPECT_NEAR(high.current_ua, 100000, 600);
    }
  }
  EXPECT_NEAR(spike_windows, 40, 1);  // one window in five
  // D0's edges: up every 5 ms, down 2 ms later.
  ASSERT_GE(edges.size(), 70U);
  for (std::size_t i = 2; i < 20; ++i) {
    const int64_t apart = edges[i].t_ns - edges[i - 1].t_ns;
    EXPECT_EQ(apart, edges[i].logic == 1 ? 3'000'000 : 2'000'000) << "edge " << i;
  }
}

TEST(Ppk2, LostSamplesAreCountedAndTimeGoesOnAcrossThem) {
  SimPpk2 sim({.drop_every = 1000});
  sim.start();
  SteadyClock clock;
  auto probe = open_probe(parse_probe_spec("ppk2:" + sim.port() + ",mode=ampere,vdd=5000,rate=100"), 0, clock);
  std::vector<PowerSample> samples;
  probe->start();
  while (samples.size() < 3 * 50) probe->read(samples);
  probe->stop();
  EXPECT_EQ(sim.mode(), 1);
  EXPECT_NEAR(static_cast<double>(probe->read_errors()), 50, 2);  // one in 1000 of 50,000
  // A window of 1000 samples that lost one spans 1001 sample times: time goes on across the
  // loss instead of shrinking the run.
  EXPECT_NEAR(static_cast<double>(samples[147].t_ticks - samples[0].t_ticks), 49 * 1001 * 10e3, 20e3);
}

TEST(Ppk2, APortThatIsNoPpk2SaysSoInOneLine) {
  SteadyClock clock;
  EXPECT_THROW(open_probe(parse_probe_spec("ppk2:/nonexistent/ttyACM9"), 0, clock), DeviceError);
  EXPECT_THROW(parse_probe_spec("ppk2:/dev/ttyACM0,mode=fast"), InputError);
  EXPECT_THROW(parse_probe_spec("ppk2:/dev/ttyACM0,shunt=1"), InputError);
}

}  // namespace
}  // namespace ergon::probes
