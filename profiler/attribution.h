#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "probes/power.h"
#include "profiler/op.h"
#include "profiler/sync.h"

namespace ergon::profiler {

/// The mapping from device ticks to host time fitted from sync exchanges:
/// host_ns = host_ref_ns + ns_per_tick x (ticks - tick_ref).
struct ClockFit {
  bool fitted = false;       ///< false: too few or implausible exchanges; nominal rate used
  double ns_per_tick = 0;    ///< the device clock's period as the host clock sees it
  /// Device seconds per host second the board declared (a simulator's speed; 1 for real
  /// boards): the device's own time runs this much faster than the host's.
  double time_scale = 1;
  double drift_ppm = 0;      ///< (fitted rate / nominal rate - 1) x 1e6 (0 when not fitted)
  uint64_t tick_ref = 0;
  double host_ref_ns = 0;    ///< host time at tick_ref (the clock offset)
  double residual_rms_ns = 0;
  double residual_max_ns = 0;
  int points_used = 0;       ///< the minimum-RTT exchanges the fit kept
  int points_total = 0;
  std::string note;          ///< why the nominal rate was used, when it was

  [[nodiscard]] double host_ns(uint64_t ticks) const;
  /// The device clock's period in the device's own time: what a span's duration is measured
  /// in (a simulator's simulated seconds, not the host's).
  [[nodiscard]] double device_ns_per_tick() const { return ns_per_tick * time_scale; }
  /// The inverse: the device tick at host time host_ns (0 before the device's tick 0).
  [[nodiscard]] uint64_t ticks_at(double host_ns) const;
};

/// A clock drifting more than this is not a crystal: a fit saying so is refused (e.g. a
/// simulator running faster than real time) and the nominal tick rate is used instead.
inline constexpr double kMaxPlausibleDriftPpm = 500;

/// NTP-style fit: each exchange gives (device midpoint, host midpoint) with an error of at
/// most half its round trip; the exchanges within 1.5 x the fastest round trip (at least the
/// fastest half) are fitted by least squares for offset and rate. Fewer than 3 usable
/// exchanges, or a drift over `max_drift_ppm`, give the nominal rate with a note. (Mapping one
/// device's clock onto another's through host time needs the fitted rates whatever they are:
/// pass infinity there.) `time_scale` is the board's declared pace (Hello): the rate expected
/// is the nominal one times it, and drift is measured against that; 0 (an unpaced simulator,
/// whose time does not follow the host's) takes the nominal rate and says why, as a fact.
ClockFit fit_clock(std::span<const SyncPoint> points, uint64_t tick_hz,
                   double max_drift_ppm = kMaxPlausibleDriftPpm, double time_scale = 1);

/// Samples stamped by another device's clock (a power logger on the board's supply lead, an
/// INA219 read by a second board), moved onto the board's clock: logger ticks to host time
/// by the logger's fit, host time to board ticks by the inverse of the board's fit. Each fit
/// comes from that device's own sync exchanges, so the two clocks may differ in rate and
/// offset arbitrarily; what remains is the two fits' residuals at every window edge. Fit
/// both with no drift limit: a simulator running faster than real time looks like a wild
/// drift to the host, but the same one on both devices, and it cancels.
std::vector<probes::PowerSample> to_board_ticks(std::span<const probes::PowerSample> samples,
                                                const ClockFit& logger, const ClockFit& board);

/// A logger's ticks mapped straight to a board's, board = offset + slope x logger, fitted from
/// op markers: the board raises a pin at each window's start and the logger (a PPK2's digital
/// input) timestamps the edge on its own clock, so the pairs need no host in between.
struct MarkerFit {
  double offset_ticks = 0;
  double slope = 1;
  int pairs = 0;            ///< rising edges paired with a window's start
  int edges = 0;            ///< rising edges seen
  double residual_rms_ns = 0;
  [[nodiscard]] uint64_t board_ticks(uint64_t logger_ticks) const;
};
/// Pairs each rising edge (logger ticks), first mapped by `logger` and `board` as
/// to_board_ticks() would, with the nearest non-idle window start within `tolerance_ns`, and
/// fits the line through the pairs. nullopt with fewer than three pairs, with fewer than 80 %
/// of the edges or windows paired, or with residuals past a tenth of the tolerance: a pin that
/// is not wired to the windows never moves the samples. `board_tick_hz` turns the tolerance
/// and the residual into board ticks and back.
std::optional<MarkerFit> fit_markers(std::span<const uint64_t> rising_edges, std::span<const OpSpan> spans,
                                     const ClockFit& logger, const ClockFit& board, uint64_t board_tick_hz,
                                     double tolerance_ns = 5e6);

/// One measurement window's energy.
struct WindowCost {
  OpSpan span;
  double time_s = 0;          ///< whole window (all repetitions)
  double gross_energy_j = 0;  ///< integral of power over the window
  double net_energy_j = 0;    ///< minus idle power x time_s
  double energy_sigma_j = 0;  ///< 1-sigma uncertainty of net_energy_j
  uint32_t samples = 0;       ///< samples inside the window
  /// Samples cover the window without a gap, so its energy is known; else only its time is
  /// (a run without a power probe, or samples lost on the link).
  bool covered = false;
};

/// One op in one phase, per repetition: its time over every window that arrived, its energy
/// over the windows whose samples cover them (none: the energy is unknown, never 0).
struct OpCost {
  uint32_t op_id = 0;
  Phase phase = Phase::kForward;
  double time_s = 0;          ///< mean duration of one repetition, over every window
  double time_s_stddev = 0;   ///< spread of that across windows (0 with one window)
  /// Meaningful only when energy_known(): means over the covered windows.
  double gross_energy_j = 0;
  double net_energy_j = 0;
  /// 1-sigma uncertainty of net_energy_j: measurement (noise and quantization over the
  /// samples, window edges, the idle estimate) and the spread across windows.
  double energy_j_stddev = 0;
  uint32_t sample_count = 0;
  uint32_t windows = 0;            ///< windows timed (every window of the op that arrived)
  uint32_t windows_uncovered = 0;  ///< of those, windows whose samples did not (all) arrive
  [[nodiscard]] uint32_t energy_windows() const { return windows - windows_uncovered; }
  [[nodiscard]] bool energy_known() const { return energy_windows() > 0; }
};

struct Attribution {
  ClockFit clock;
  double sample_period_s = 0;  ///< median spacing of the samples
  double power_lsb_w = 0;      ///< the finest step seen in the power readings
  double idle_power_w = 0;     ///< from the idle windows (phase idle), else from the gaps
  double idle_power_sigma_w = 0;
  uint32_t idle_samples = 0;
  uint32_t samples_flagged = 0;  ///< overflow or stale samples, left out
  uint64_t samples_seen = 0;     ///< samples of the rail that arrived (0: time costs only)
  std::vector<WindowCost> windows;
  std::vector<OpCost> ops;  ///< by op id, then phase; idle windows not included
};

/// Energy attribution of one run on one rail: every span's energy is the integral of power
/// over it (piecewise linear through the samples),
/// gross and net of the idle power measured in the same run. Spans and samples are in device
/// ticks (the probe read by the board), converted to seconds by the fitted clock. Samples
/// flagged overflow or not-ready are left out. Power changes where spans begin and end, so
/// between an edge and the nearest sample inside, that sample's power holds. A window is
/// covered when its samples reach within two sample periods of each edge with no gap over
/// three (a window shorter than a sample interval: when samples lie that close on either
/// side); others are timed but get no energy (a run without samples at all gives time costs
/// only, with `samples_seen` 0). Spans may overlap (a page-out during compute): each gets the whole power over
/// its own interval, so overlapping energy is counted once per span (docs/accuracy.md).
Attribution attribute(std::span<const OpSpan> spans, std::span<const probes::PowerSample> samples,
                      std::span<const SyncPoint> sync, uint64_t tick_hz, uint8_t rail = 0,
                      double time_scale = 1);

}  // namespace ergon::profiler
