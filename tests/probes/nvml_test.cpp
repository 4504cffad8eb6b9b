#include "probes/nvml.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>

#include "tests/support/fake_clock.h"
#include "common/error.h"

namespace ergon::probes {
namespace {

// An environment variable the fake NVML library reads, set for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

/// What `open` refused with (a DeviceError's message), or "(opened)".
template <class Open>
std::string device_error_of(Open open) {
  try {
    open();
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "(opened)";
}

// A test's clock that the fake NVML library's time follows (its energy counter steps every
// 100 ms of it; a replayed trace advances with it).
class NvmlClock final : public Clock {
 public:
  NvmlClock() {
    void* lib = ::dlopen(FAKE_NVML_LIBRARY, RTLD_NOW);
    set_ = reinterpret_cast<void (*)(long long)>(::dlsym(lib, "fake_nvml_set_time_ns"));
    set_(now_);
  }
  [[nodiscard]] int64_t now_ns() const override { return now_; }
  void sleep_until_ns(int64_t t_ns) const override {
    if (t_ns > now_) now_ = t_ns;
    set_(now_);
  }
  void set_ns(int64_t t_ns) {
    now_ = t_ns;
    set_(now_);
  }

 private:
  void (*set_)(long long) = nullptr;
  mutable int64_t now_ = 0;
};

TEST(Nvml, WithoutADriverTheMessageSaysNvmlIsNotAvailable) {
  const std::string why = device_error_of([] { Nvml::open("libnvidia-ml-that-is-not-here.so.1"); });
  EXPECT_NE(why.find("NVML is not available"), std::string::npos) << why;
}

TEST(Nvml, ReadsPowerEnergyAndLimitsAndSetsALimitWithinRange) {
  auto nvml = Nvml::open(FAKE_NVML_LIBRARY);
  ASSERT_EQ(nvml->device_count(), 2U);
  EXPECT_EQ(nvml->name(1), "Fake H100 1");
  EXPECT_DOUBLE_EQ(nvml->power_limit_w(0), 700);
  EXPECT_DOUBLE_EQ(nvml->instant_power_w(0), 450);
  EXPECT_DOUBLE_EQ(nvml->power_w(0), 255);  // the one-second average, lagging the load
  EXPECT_GT(nvml->energy_j(0), 0);
  const auto [lo, hi] = nvml->power_limit_range_w(0);
  EXPECT_DOUBLE_EQ(lo, 200);
  EXPECT_DOUBLE_EQ(hi, 700);
  nvml->set_power_limit_w(0, 300);  // a cap below what the load wants
  EXPECT_DOUBLE_EQ(nvml->power_limit_w(0), 300);
  EXPECT_DOUBLE_EQ(nvml->instant_power_w(0), 300);
  EXPECT_THROW(nvml->set_power_limit_w(0, 150), InputError);
  {
    const ScopedEnv deny("FAKE_NVML_DENY", "1");
    const std::string why = device_error_of([&] { nvml->set_power_limit_w(0, 400); });
    EXPECT_NE(why.find("Insufficient Permissions (setting a power limit needs root"), std::string::npos) << why;
  }
  nvml->set_power_limit_w(0, 700);
}

TEST(Nvml, TheProbeSamplesTheEnergyCounterBetweenItsStepsNotAtItsOwnRate) {
  NvmlClock clock;
  // Asked for 20 samples a second from a counter that moves every 100 ms: each sample spans
  // one step of the counter (a 50 ms interval would read 0 W and twice the power in turn).
  auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock);
  ASSERT_EQ(probe->info().channels.size(), 2U);
  EXPECT_EQ(probe->info().location, "NVML energy counter, the mean between its steps, moving every 100 ms");
  EXPECT_DOUBLE_EQ(probe->info().max_rate_hz, 10);
  probe->start();
  std::vector<PowerSample> s;
  const int64_t t0 = clock.now_ns();
  EXPECT_EQ(t0 % 100'000'000, 0);  // start() waited for a step
  // Each NVML call costs about a millisecond of kernel time on an H100: the counter is polled
  // only from a little before each step is due, not all through the 100 ms.
  auto reads = reinterpret_cast<long long (*)()>(::dlsym(::dlopen(FAKE_NVML_LIBRARY, RTLD_NOW), "fake_nvml_energy_reads"));
  const long long reads_before = reads();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(probe->read(s), 2U);
  EXPECT_LE(reads() - reads_before, 3 * 2 * 10);  // at most 10 reads per GPU and step
  ASSERT_EQ(s.size(), 6U);
  EXPECT_EQ(s[1].rail, 1);
  for (const auto& x : s) EXPECT_EQ(x.power_uw, 450'000'000);  // 45 J per 100 ms, not the lagging 255 W average
  EXPECT_EQ(s[0].t_ticks, static_cast<uint64_t>(t0 + 50'000'000));  // half way between its steps
  EXPECT_EQ(clock.now_ns() - t0, 300'000'000);
}

TEST(Nvml, OnARealH100TheEnergyProbeFollowsALoadWithinOneStepAndSumsToTheCounter) {
  const ScopedEnv trace("FAKE_NVML_TRACE", ERGON_TEST_DATA_DIR "/nvml/h100_step_response.csv");
  const double load_start_s = 2.996344;  // the trace's first row is 2.996 s before the load
  auto first_at_least = [&](const std::vector<PowerSample>& s, double w) {
    for (const auto& x : s)
      if (x.power_uw >= w * 1e6) return static_cast<double>(x.t_ticks) * 1e-9 - load_start_s;
    return 1e9;
  };
  auto until = [&](Probe& probe, NvmlClock& clock, double end_s) {
    std::vector<PowerSample> s;
    probe.start();
    while (clock.now_ns() < static_cast<int64_t>(end_s * 1e9)) probe.read(s);
    return s;
  };
  {
    NvmlClock clock;
    auto nvml = Nvml::open(FAKE_NVML_LIBRARY);
    auto probe = open_nvml_probe(nvml, 0.05, clock);
    const auto s = until(*probe, clock, 9.5);
    ASSERT_GT(s.size(), 80U);
    // It idles at 126 W, and at 77 W once the load's process has ended (6.47 s).
    for (const auto& x : s) EXPECT_GE(x.power_uw, 70'000'000) << "at " << x.t_ticks;
    // The load's first kernel ran at 0; the counter's first step after it shows it, in a
    // sample stamped half way back to the step before.
    EXPECT_LT(first_at_least(s, 600), 0.3);
    // The power as attribution reads it (linear between samples) holds the counter's energy
    // between the first and last sample's times to within the counter's resolution.
    double sum_j = 0;
    for (std::size_t i = 1; i < s.size(); ++i)
      sum_j += (s[i].power_uw + s[i - 1].power_uw) * 0.5e-6 * static_cast<double>(s[i].t_ticks - s[i - 1].t_ticks) * 1e-9;
    clock.set_ns(static_cast<int64_t>(s.front().t_ticks));
    const double e0 = nvml->energy_j(0);
    clock.set_ns(static_cast<int64_t>(s.back().t_ticks));
    EXPECT_NEAR(sum_j, nvml->energy_j(0) - e0, 0.01 * sum_j);
  }
  {
    // nvmlDeviceGetPowerUsage, a one-second average, is still short of the load 0.8 s in,
    // and gets there within 1.2 s.
    NvmlClock clock;
    auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock, NvmlSource::kAverage);
    const double reached_s = first_at_least(until(*probe, clock, 6), 600);
    EXPECT_GT(reached_s, 0.8);
    EXPECT_LT(reached_s, 1.2);
  }
}

TEST(Nvml, WithoutAnEnergyCounterTheProbeReadsInstantPowerNeverTheOneSecondAverage) {
  const ScopedEnv no_energy("FAKE_NVML_NO_ENERGY", "1");
  NvmlClock clock;
  auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock);
  EXPECT_EQ(probe->info().location, "NVML instant power");
  probe->start();
  std::vector<PowerSample> s;
  const int64_t t0 = clock.now_ns();
  for (int i = 0; i < 3; ++i) probe->read(s);
  ASSERT_EQ(s.size(), 6U);
  EXPECT_EQ(s[0].power_uw, 450'000'000);
  EXPECT_EQ(clock.now_ns() - t0, 100'000'000);  // reads at 0, 50 and 100 ms
}

TEST(Nvml, TheOneSecondAverageIsUsedOnlyWhenNothingBetterExistsAndTheProbeSaysSo) {
  const ScopedEnv no_energy("FAKE_NVML_NO_ENERGY", "1");
  const ScopedEnv no_fields("FAKE_NVML_NO_FIELDS", "1");
  NvmlClock clock;
  auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock);
  EXPECT_NE(probe->info().location.find("1 s average"), std::string::npos) << probe->info().location;
  // Asked for by name, a source the driver lacks is refused with NVML's reason.
  const std::string why =
      device_error_of([&] { open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock, NvmlSource::kInstant); });
  EXPECT_NE(why.find("NVML_FI_DEV_POWER_INSTANT"), std::string::npos) << why;
}

TEST(Nvml, GpusWhoseCountersStepOutOfPhaseEachGetTheirOwnStepsMeans) {
  // GPU 1's counter moves every 80 ms from 30 ms on, GPU 0's every 100 ms.
  const ScopedEnv step("FAKE_NVML_GPU1_STEP", "80,30");
  NvmlClock clock;
  auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock);
  EXPECT_DOUBLE_EQ(probe->info().max_rate_hz, 10);  // the slower counter's
  probe->start();
  std::vector<PowerSample> s;
  while (s.size() < 40) probe->read(s);
  int per_gpu[2] = {0, 0};
  for (const auto& x : s) {
    ++per_gpu[x.rail];
    EXPECT_EQ(x.power_uw, 450'000'000) << "GPU " << int{x.rail} << " at " << x.t_ticks;
    // Half way between two of its own steps.
    const int64_t t = static_cast<int64_t>(x.t_ticks);
    if (x.rail == 0) EXPECT_EQ(t % 100'000'000, 50'000'000) << t;
    else EXPECT_EQ((t - 30'000'000) % 80'000'000, 40'000'000) << t;
  }
  EXPECT_GT(per_gpu[1], per_gpu[0]);  // its counter steps more often
}

TEST(Nvml, ACounterThatNeverMovesIsPassedOverUnderAutoAndRefusedWhenAskedFor) {
  const ScopedEnv stuck("FAKE_NVML_STUCK", "1");
  NvmlClock clock;
  auto probe = open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock);
  EXPECT_EQ(probe->info().location, "NVML instant power");
  const std::string why =
      device_error_of([&] { open_nvml_probe(Nvml::open(FAKE_NVML_LIBRARY), 0.05, clock, NvmlSource::kEnergy); });
  EXPECT_NE(why.find("energy counter of GPU 0 has not moved for 1 s"), std::string::npos) << why;
}

TEST(Nvml, TheProbeSpecNamesItsSource) {
  EXPECT_EQ(parse_probe_spec("nvml,source=instant").options.at("source"), "instant");
  EXPECT_THROW(parse_probe_spec("nvml,source=fast"), InputError);
}

}  // namespace
}  // namespace ergon::probes
