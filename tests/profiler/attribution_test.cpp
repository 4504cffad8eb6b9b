#include "profiler/attribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "devices/board_profile.h"
#include "devices/profile_plan.h"
#include "tests/support/sim_harness.h"

namespace ergon::profiler {
namespace {

using ergon::testing::Harness;

struct Errors {
  std::vector<double> relative;  // |measured - true| / true net energy, windows >= 50 samples
  std::vector<double> time;      // |measured - true| / true duration, the same windows
  int covered_by_2sigma = 0;
  int windows = 0;
};

Errors window_errors(const Harness& h, const Attribution& a) {
  Errors e;
  const auto& truth = h.sim.truth();
  const double idle_w = h.sim.board().idle_w;
  for (std::size_t i = 0; i < a.windows.size() && i < truth.size(); ++i) {
    const WindowCost& w = a.windows[i];
    if (w.span.phase == Phase::kIdle || !w.covered || w.samples < 50) continue;
    const double true_net =
        (truth[i].power_w - idle_w) * static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9;
    const double err = std::abs(w.net_energy_j - true_net);
    e.relative.push_back(err / true_net);
    const double true_s = static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9;
    e.time.push_back(std::abs(w.time_s - true_s) / true_s);
    e.covered_by_2sigma += err <= 2 * w.energy_sigma_j ? 1 : 0;
    ++e.windows;
  }
  return e;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

/// Exchanges with a device clock running `drift_ppm` fast at 1 MHz, `offset_s` ahead, and
/// one-way delays of 100 us plus, on every third exchange, a queueing delay of 5 ms on the way
/// back (which the fit must ignore).
std::vector<SyncPoint> exchanges(double drift_ppm, double offset_s, double scale = 1) {
  std::vector<SyncPoint> points;
  for (uint32_t k = 0; k < 30; ++k) {
    const int64_t host_tx = 1'000'000'000 + int64_t{k} * 500'000'000;
    const double arrive_ns = static_cast<double>(host_tx) + 100'000;
    auto ticks = [&](double host_ns) {
      return static_cast<uint64_t>((host_ns * scale * (1 + drift_ppm * 1e-6) + offset_s * 1e9) / 1000);
    };
    const uint64_t rx = ticks(arrive_ns);
    const uint64_t tx = ticks(arrive_ns + 20'000);
    const int64_t back = k % 3 == 0 ? 5'100'000 : 100'000;
    points.push_back({k, host_tx, rx, tx, static_cast<int64_t>(arrive_ns) + 20'000 + back});
  }
  return points;
}

TEST(ClockFit, RecoversDriftAndOffsetFromTheFastestExchanges) {
  const auto fit = fit_clock(exchanges(50, 7.5), 1'000'000);
  ASSERT_TRUE(fit.fitted) << fit.note;
  EXPECT_NEAR(fit.drift_ppm, -50 / (1 + 50e-6), 0.5);  // host ns per device tick is slower
  EXPECT_EQ(fit.points_used, 20);                       // the slow third left out
  EXPECT_LT(fit.residual_rms_ns, 1000);
  // A device time maps back to the host time it was stamped at, within a microsecond.
  const uint64_t ticks = static_cast<uint64_t>((5e9 * (1 + 50e-6) + 7.5e9) / 1000);
  EXPECT_NEAR(fit.host_ns(ticks), 5e9, 1000);
}

TEST(ClockFit, AnImplausibleDriftFallsBackToTheNominalRateAndSaysWhy) {
  const auto fit = fit_clock(exchanges(5000, 0), 1'000'000);
  EXPECT_FALSE(fit.fitted);
  EXPECT_EQ(fit.ns_per_tick, 1000);
  EXPECT_NE(fit.note.find("beyond any crystal"), std::string::npos) << fit.note;
  EXPECT_FALSE(fit_clock({}, 1'000'000).fitted);
}

TEST(ClockFit, ASimulatorFasterThanRealTimeIsFittedAgainstThePaceItDeclares) {
  // A simulator at 8 simulated seconds per real second, its crystal 30 ppm fast.
  const auto fit = fit_clock(exchanges(30, 2, 8), 1'000'000, kMaxPlausibleDriftPpm, 8);
  ASSERT_TRUE(fit.fitted) << fit.note;
  EXPECT_NEAR(fit.drift_ppm, -30 / (1 + 30e-6), 0.5);
  EXPECT_NEAR(fit.device_ns_per_tick(), 1000 / (1 + 30e-6), 1e-3);  // spans in simulated time
  // Without its declared pace the same exchanges look like no crystal at all.
  EXPECT_FALSE(fit_clock(exchanges(30, 2, 8), 1'000'000).fitted);
  // An unpaced simulator's time does not follow the host's: its nominal rate, said as a fact.
  const auto unpaced = fit_clock(exchanges(30, 2, 8), 1'000'000, kMaxPlausibleDriftPpm, 0);
  EXPECT_FALSE(unpaced.fitted);
  EXPECT_EQ(unpaced.device_ns_per_tick(), 1000);
  EXPECT_NE(unpaced.note.find("unpaced"), std::string::npos) << unpaced.note;
}

TEST(Attribution, NetEnergyOfEveryWindowMatchesTheSimulatorsTruth) {
  for (const char* board : {"pi4", "tx2", "nrf52840", "mkr1000"}) {
    devices::SimBoardOptions options;
    options.clock_offset_ns = 7'000'000'000;  // seconds of offset
    Harness h(*devices::find_board(board), {}, options);
    h.run(900);
    const Attribution a = attribute(h.sink.spans, h.sink.samples_, h.sink.syncs, h.sink.hello.tick_hz);
    const Errors e = window_errors(h, a);
    SCOPED_TRACE(board);
    ASSERT_GT(e.windows, 20);
    std::printf("%s: %d windows, median %.3f%%, p95 %.3f%%, max %.3f%%, within 2 sigma %.1f%%, drift %.1f ppm (fit %d: %s), idle %.4f W (true %.4f); time median %.4f%%, p95 %.4f%%\n",
                board, e.windows, 100 * quantile(e.relative, 0.5), 100 * quantile(e.relative, 0.95),
                100 * quantile(e.relative, 1.0), 100.0 * e.covered_by_2sigma / e.windows,
                a.clock.drift_ppm, a.clock.fitted, a.clock.note.c_str(), a.idle_power_w, h.sim.board().idle_w,
                100 * quantile(e.time, 0.5), 100 * quantile(e.time, 0.95));
    EXPECT_LE(quantile(e.relative, 0.5), 0.01);
    EXPECT_LE(quantile(e.relative, 0.95), 0.03);
    // A window's time is two ticks of the board's clock, mapped by the fitted rate.
    EXPECT_LE(quantile(e.time, 0.5), 0.001);
    EXPECT_LE(quantile(e.time, 0.95), 0.001);
    EXPECT_GE(e.covered_by_2sigma, 0.9 * e.windows);
  }
}

TEST(Attribution, WithoutPowerSamplesEveryOpIsTimedAndItsEnergyIsUnknown) {
  Harness h(*devices::find_board("pi4"));
  h.run(300);
  const Attribution a = attribute(h.sink.spans, {}, h.sink.syncs, h.sink.hello.tick_hz);
  EXPECT_EQ(a.samples_seen, 0U);
  ASSERT_FALSE(a.ops.empty());
  const auto& truth = h.sim.truth();
  for (std::size_t i = 0; i < a.windows.size() && i < truth.size(); ++i) {
    EXPECT_FALSE(a.windows[i].covered);
    const double true_s = static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9;
    EXPECT_NEAR(a.windows[i].time_s, true_s, 1e-4 * true_s + 1e-6) << "window " << i;
  }
  for (const OpCost& c : a.ops) {
    EXPECT_FALSE(c.energy_known()) << "op " << c.op_id;
    EXPECT_GT(c.windows, 0U);
    EXPECT_EQ(c.windows_uncovered, c.windows);
    EXPECT_GT(c.time_s, 0);
  }
}

TEST(Attribution, AWindowWhoseSamplesWereLostKeepsItsTimeButNotItsEnergy) {
  Harness h(*devices::find_board("pi4"));
  h.run(300);
  // Lose the samples of the middle third of the run, as a dropped link would.
  std::vector<probes::PowerSample> kept;
  const auto n = h.sink.samples_.size();
  for (std::size_t i = 0; i < n; ++i)
    if (i < n / 3 || i > 2 * n / 3) kept.push_back(h.sink.samples_[i]);
  const Attribution all = attribute(h.sink.spans, h.sink.samples_, h.sink.syncs, h.sink.hello.tick_hz);
  const Attribution some = attribute(h.sink.spans, kept, h.sink.syncs, h.sink.hello.tick_hz);
  ASSERT_EQ(all.ops.size(), some.ops.size());
  int partly = 0;
  for (std::size_t k = 0; k < all.ops.size(); ++k) {
    EXPECT_EQ(some.ops[k].windows, all.ops[k].windows) << "every window is timed";
    EXPECT_DOUBLE_EQ(some.ops[k].time_s, all.ops[k].time_s);
    partly += some.ops[k].windows_uncovered > all.ops[k].windows_uncovered ? 1 : 0;
  }
  EXPECT_GT(partly, 0);
}

TEST(Attribution, ErrorGrowsAsWindowsShrinkAndTheUncertaintySaysSo) {
  std::printf("| board | window | windows | samples (median) | median error | p95 error | "
              "median 1-sigma | within 2 sigma |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  struct Seen {
    double samples = 0;
    double sigma = 0;  ///< relative to the window's true net energy
  };
  for (const char* board : {"pi4", "tx2", "nrf52840", "mkr1000"}) {
    std::map<std::size_t, Seen> previous;  // by window: the same plan, the same windows in order
    double previous_samples = 1e300;
    for (uint32_t window_us : {60'000U, 20'000U, 5'000U}) {
      devices::RecordOptions options;
      options.min_window_us = window_us;
      Harness h(*devices::find_board(board), options);
      h.run(900);
      const Attribution a = attribute(h.sink.spans, h.sink.samples_, h.sink.syncs, h.sink.hello.tick_hz);
      Errors e;
      std::vector<double> samples, sigma;
      std::map<std::size_t, Seen> seen;
      const auto& truth = h.sim.truth();
      for (std::size_t i = 0; i < a.windows.size(); ++i) {
        const WindowCost& w = a.windows[i];
        if (w.span.phase == Phase::kIdle || !w.covered) continue;
        const double true_net = (truth[i].power_w - h.sim.board().idle_w) *
                                static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9;
        const double err = std::abs(w.net_energy_j - true_net);
        e.relative.push_back(err / true_net);
        e.covered_by_2sigma += err <= 2 * w.energy_sigma_j ? 1 : 0;
        ++e.windows;
        samples.push_back(w.samples);
        sigma.push_back(w.energy_sigma_j / true_net);
        seen[i] = {static_cast<double>(w.samples), w.energy_sigma_j / true_net};
      }
      SCOPED_TRACE(std::string(board) + " at " + std::to_string(window_us) + " us");
      ASSERT_GT(e.windows, 20);
      const double median_sigma = quantile(sigma, 0.5);
      std::printf("| %s | %u ms | %d | %.0f | %.2f %% | %.2f %% | %.2f %% | %.0f %% |\n", board,
                  window_us / 1000, e.windows, quantile(samples, 0.5),
                  100 * quantile(e.relative, 0.5), 100 * quantile(e.relative, 0.95),
                  100 * median_sigma, 100.0 * e.covered_by_2sigma / e.windows);
      EXPECT_GE(e.covered_by_2sigma, 0.9 * e.windows);
      // Window by window: where the shorter minimum shortened a window, its uncertainty must
      // grow; an op slower than both minimums keeps its window as long, and its uncertainty.
      const double median_samples = quantile(samples, 0.5);
      int shortened = 0, grew = 0;
      for (const auto& [i, now] : seen) {
        const auto before = previous.find(i);
        if (before == previous.end() || now.samples >= 0.67 * before->second.samples) continue;
        ++shortened;
        grew += now.sigma > before->second.sigma ? 1 : 0;
      }
      if (!previous.empty() && median_samples < previous_samples) {
        EXPECT_GT(shortened, 0);
      }
      EXPECT_GE(grew, 0.9 * shortened) << "shorter windows must report more uncertainty";
      previous = std::move(seen);
      previous_samples = median_samples;
    }
  }
}

// The first run after an idle gap is slower (the simulated Pi 4 charges a quarter of a run):
// windows of a single repetition overstate an op's time by that much unless the plan warms
// the op up first. Each window is compared with what its run took warm: the simulator's true
// duration less the cold start its truth model charged (jitter and working set stay in both).
TEST(Attribution, WarmUpRunsKeepTheColdStartOutOfShortWindows) {
  const auto board = *devices::find_board("pi4");
  auto median_time_error = [&](uint16_t warmup_reps) {
    devices::ProfilePlan plan = devices::default_profile_plan(board, 1);
    for (auto& op : plan.ops) op.warmup_reps = op.phase == Phase::kIdle ? 0 : warmup_reps;
    devices::RecordOptions options;
    options.plan = plan;
    options.min_window_us = 1;  // one repetition per window: the cold start is all of it
    Harness h(board, options);
    h.run(900);
    const Attribution a =
        attribute(h.sink.spans, h.sink.samples_, h.sink.syncs, h.sink.hello.tick_hz);
    const auto& truth = h.sim.truth();
    std::vector<double> errors;
    for (std::size_t i = 0; i < a.windows.size() && i < truth.size(); ++i) {
      const WindowCost& w = a.windows[i];
      if (w.span.phase == Phase::kIdle) continue;
      EXPECT_EQ(w.span.repetitions, 1U);
      const double warm_s =
          static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9 - truth[i].time_by.cold_start;
      errors.push_back(w.time_s / warm_s - 1);
    }
    EXPECT_GT(errors.size(), 20U);
    return quantile(errors, 0.5);
  };
  EXPECT_NEAR(median_time_error(0), board.cold_start_penalty, 0.01);
  EXPECT_NEAR(median_time_error(1), 0.0, 0.001);
}

// An INA219 read by a second board: its samples carry the logger's clock (here +70 ppm and
// 9.9 s since its boot, against the Pi 4's -32 ppm and 123 s). Through both clock fits they
// attribute as accurately as the board's own monitor does.
TEST(Attribution, APowerLoggerOnItsOwnClockAttributesAsAccuratelyAsTheBoardsOwnMonitor) {
  testing::LoggedHarness h(*devices::find_board("pi4"));
  h.run(900);
  ASSERT_EQ(h.session.state(), devices::SessionState::kCompleted);
  ASSERT_EQ(h.logger_session.state(), devices::SessionState::kCompleted);
  EXPECT_TRUE(h.sink.samples_.empty()) << "the board has no monitor of its own";
  ASSERT_GT(h.logger_sink.samples_.size(), 1000U);
  EXPECT_EQ(h.logger_sink.hello.kind, devices::BoardKind::kPowerLogger);

  const ClockFit logger = fit_clock(h.logger_sink.syncs, h.logger_sink.hello.tick_hz);
  const ClockFit board = fit_clock(h.sink.syncs, h.sink.hello.tick_hz);
  ASSERT_TRUE(logger.fitted && board.fitted);
  EXPECT_NEAR(logger.drift_ppm, -70, 1);  // a fast clock: fewer host ns per tick
  const auto samples = to_board_ticks(h.logger_sink.samples_, logger, board);
  const Attribution a = attribute(h.sink.spans, samples, h.sink.syncs, h.sink.hello.tick_hz);
  Errors e;
  const auto& truth = h.sim.truth();
  for (std::size_t i = 0; i < a.windows.size() && i < truth.size(); ++i) {
    const WindowCost& w = a.windows[i];
    if (w.span.phase == Phase::kIdle || w.samples < 50) continue;
    ASSERT_TRUE(w.covered);
    const double true_net = (truth[i].power_w - h.sim.board().idle_w) *
                            static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9;
    const double err = std::abs(w.net_energy_j - true_net);
    e.relative.push_back(err / true_net);
    e.covered_by_2sigma += err <= 2 * w.energy_sigma_j ? 1 : 0;
    ++e.windows;
  }
  ASSERT_GT(e.windows, 20);
  std::printf("pi4 through a logger on its own clock: %d windows, median error %.2f %%, p95 "
              "%.2f %%, within 2 sigma %.0f %%\n",
              e.windows, 100 * quantile(e.relative, 0.5), 100 * quantile(e.relative, 0.95),
              100.0 * e.covered_by_2sigma / e.windows);
  EXPECT_LE(quantile(e.relative, 0.5), 0.01);
  EXPECT_LE(quantile(e.relative, 0.95), 0.03);
  EXPECT_GE(e.covered_by_2sigma, 0.9 * e.windows);

  // Taken at face value, the logger's ticks do not even overlap the board's windows.
  const Attribution raw =
      attribute(h.sink.spans, h.logger_sink.samples_, h.sink.syncs, h.sink.hello.tick_hz);
  EXPECT_TRUE(std::none_of(raw.windows.begin(), raw.windows.end(),
                           [](const WindowCost& w) { return w.covered && w.samples > 0; }));
}

// tegrastats prints each rail's mean power over its interval (100 ms here), stamped when the
// line prints; attribution takes samples as instants. The first line inside a window that
// follows idle still averages some idle, and attribution holds it back to the window's start
// and ramps from it to the next: a window loses 5/12 of an interval's worth of its net power
// on average (u (1 - u) + (1 - u) / 2 intervals for a line u intervals in), -4 % of a 1 s
// window, -0.4 % of a 10 s one. Only windows of about 10 s (100 lines) meet the goal; a
// window shorter than an interval gets the interval means around it, not its own power.
// (No warm-up runs here: a warm-up at the window's power before it would hide part of this.)
TEST(Attribution, TegrastatsIntervalMeansMeetTheGoalOnlyOnWindowsOfManyIntervals) {
  const auto tx2 = *devices::find_board("tx2");
  const double interval_s = 0.1;
  std::printf("| window | windows covered | of | lines (median) | median error | p95 error | median signed |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (double window_s : {0.06, 1.0, 5.0, 10.0}) {
    devices::ProfilePlan plan = devices::default_profile_plan(tx2, 1);
    plan.ops.front().shape = profiler::idle(3'000'000);  // idle power from 30 lines
    for (auto& op : plan.ops) {
      if (op.phase == Phase::kIdle) continue;
      op.idle_after_us = 1'000'000;
      op.warmup_reps = 0;
    }
    devices::RecordOptions options;
    options.plan = plan;
    options.min_window_us = static_cast<uint32_t>(window_s * 1e6);
    devices::SimBoardOptions sensor{.sensor = devices::SimPowerSensor::kTegrastats,
                                    .tegrastats_interval_ns = static_cast<int64_t>(interval_s * 1e9)};
    Harness h(tx2, options, sensor);
    h.run(2000, true, 0.01);
    ASSERT_EQ(h.session.state(), devices::SessionState::kCompleted);
    const Attribution a = attribute(h.sink.spans, h.sink.samples_, h.sink.syncs, h.sink.hello.tick_hz);
    EXPECT_NEAR(a.sample_period_s, interval_s, 1e-3);
    EXPECT_NEAR(a.idle_power_w, tx2.idle_w, 0.002);
    std::vector<double> relative, signed_error, lines;
    int windows = 0;
    const auto& truth = h.sim.truth();
    for (std::size_t i = 0; i < a.windows.size(); ++i) {
      const WindowCost& w = a.windows[i];
      if (w.span.phase == Phase::kIdle) continue;
      ++windows;
      if (!w.covered) continue;
      const double true_net = truth[i].energy_j - tx2.idle_w * static_cast<double>(truth[i].end_ns - truth[i].begin_ns) * 1e-9;
      relative.push_back(std::abs(w.net_energy_j - true_net) / true_net);
      signed_error.push_back(w.net_energy_j / true_net - 1);
      lines.push_back(w.samples);
    }
    SCOPED_TRACE(std::to_string(window_s) + " s windows");
    std::printf("| %.2f s | %zu | %d | %.0f | %.2f %% | %.2f %% | %+.2f %% |\n", window_s, relative.size(), windows,
                lines.empty() ? 0.0 : quantile(lines, 0.5), relative.empty() ? 0.0 : 100 * quantile(relative, 0.5),
                relative.empty() ? 0.0 : 100 * quantile(relative, 0.95),
                signed_error.empty() ? 0.0 : 100 * quantile(signed_error, 0.5));
    if (window_s < interval_s) {
      // Between the lines around it: not its own power. Most such windows are far off.
      if (!relative.empty()) {
        EXPECT_GT(quantile(relative, 0.5), 0.05);
      }
      continue;
    }
    ASSERT_GT(relative.size(), 20U);
    const double lag = -5.0 / 12 * interval_s / window_s;  // the lag's share of a window
    EXPECT_GT(quantile(signed_error, 0.5), 1.5 * lag);
    EXPECT_LT(quantile(signed_error, 0.5), 0.5 * lag);
    if (quantile(lines, 0.5) >= 100) {
      EXPECT_LE(quantile(relative, 0.5), 0.01);
      EXPECT_LE(quantile(relative, 0.95), 0.03);
    }
  }
}

}  // namespace
}  // namespace ergon::profiler
