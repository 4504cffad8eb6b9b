#pragma once

// The simulator's truth: what a simulated board really takes and draws, apart from the
// published figures the planner's profile costs come from. Effects, figures and sources:
// docs/accuracy.md, "Simulator truth model".

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "devices/board_profile.h"
#include "devices/link_profile.h"
#include "profiler/op.h"

namespace ergon::devices {

/// How far each effect of the truth model moved a time (s) or an energy (J) away from the
/// published profile's. Applied in this order, each on top of the ones before; they sum to
/// truth minus profile exactly.
struct TruthEffects {
  double working_set = 0;  ///< memory-bound work past the last-level cache
  double throttling = 0;   ///< the thermal governor's clock cap
  double jitter = 0;       ///< per-invocation time spread (and rounding to whole ns)
  double storage = 0;      ///< page-in and page-out latency spread
  double cold_start = 0;   ///< the first run after an idle gap
  double power = 0;        ///< per-window spread of dynamic power (energy only)

  [[nodiscard]] double total() const {
    return working_set + throttling + jitter + storage + cold_start + power;
  }
  TruthEffects& operator+=(const TruthEffects& o);
};

/// One effect's name and share, for people ("working set", "throttling", ...).
struct NamedShare {
  std::string_view name;
  double value = 0;
};
/// The effects in order, named.
std::vector<NamedShare> named(const TruthEffects& effects);

/// Invocations of one op as they really ran: a measurement window, a warm-up or a step.
struct OpRun {
  uint32_t invocations = 0;
  int64_t duration_ns = 0;  ///< true duration, cold start included
  double power_w = 0;       ///< true board power throughout (constant within the run)
  bool throttled = false;   ///< the clock was capped for it
  double temperature_c = 0; ///< the die's temperature when it began
  /// What the published profile says these invocations take, and what each effect added.
  double profile_time_s = 0;
  double profile_energy_j = 0;
  TruthEffects time_by;    ///< seconds
  TruthEffects energy_by;  ///< joules
};

/// The simulator's truth model of one board: time jitter, thermal throttling, the working
/// set, storage latency, cold starts and power spread, drawn from its own seeded generator
/// (the same seed and plan give the same truth, however it is measured). Not thread-safe.
class TruthModel {
 public:
  TruthModel(const SimTruth& params, uint64_t seed);

  /// Runs an op on `board` (as it is now: its power mode and threads). `min_time_s` > 0:
  /// invocations repeat until they last that long (a measurement window); otherwise exactly
  /// `invocations` run. `cold`: the first follows an idle gap and takes the board's
  /// cold_start_penalty of one more. Idle ops take their length at idle power, exactly.
  OpRun run(const BoardProfile& board, const profiler::OpShape& shape, profiler::Phase phase,
            uint32_t invocations, double min_time_s, bool cold);

  /// Time passes up to true time t_ns with the board drawing `dynamic_w` above idle: the die
  /// heats or cools, and the governor throttles or releases. Earlier times are ignored.
  void advance(int64_t t_ns, double dynamic_w);

  [[nodiscard]] double temperature_c() const { return temperature_c_; }
  [[nodiscard]] bool throttled() const { return throttled_; }
  [[nodiscard]] const SimTruth& params() const { return params_; }

  /// The link the simulated board talks to its host over: what its transfers (protocol v6,
  /// OpKind::kTransfer) take and draw. Default: ethernet for a Linux board, uart-1m for a
  /// microcontroller (default_link()).
  void set_link(const LinkProfile& link) { link_ = link; }
  [[nodiscard]] const std::optional<LinkProfile>& link() const { return link_; }

 private:
  OpRun run_transfer(const BoardProfile& board, const profiler::OpShape& shape, profiler::Phase phase,
                     uint32_t invocations, double min_time_s);

  std::optional<LinkProfile> link_;
  SimTruth params_;
  std::mt19937_64 rng_;
  double temperature_c_ = 0;
  bool throttled_ = false;
  int64_t last_ns_ = 0;
};

/// The memory-bound part's slowdown for an op touching `bytes` (1 without a cache).
double working_set_factor(const SimTruth& truth, uint64_t bytes);

/// One transfer of `bytes` over `link` as the simulator's truth takes it before jitter: a
/// round trip (the request or acknowledgement that brackets it) plus the bytes on the wire
/// (LinkData frames: header, CRC, COBS and delimiters included) at the link's rate; the
/// board draws its idle power plus the link's published energy per byte at that rate, or,
/// where none is published, the simulator's own assumption of a third of a busy core.
ProfileCost transfer_truth_cost(const BoardProfile& board, const LinkProfile& link, uint64_t bytes,
                                profiler::Phase phase);
/// Bytes on the wire for `payload_bytes` of LinkData filler.
uint64_t link_wire_bytes(uint64_t payload_bytes);
/// What one invocation of a compute op takes on average on the simulated board, warm and
/// unthrottled: the published roofline with the working-set slowdown (the expectation the
/// per-invocation jitter draws around). Paging and idle ops: the published figures, which are
/// their means.
ProfileCost expected_op_cost(const BoardProfile& board, const profiler::OpShape& shape,
                             profiler::Phase phase);
ProfileCost expected_compute_cost(const BoardProfile& board, uint64_t flops, uint64_t bytes);

/// A simulated run's truth over its timed non-idle spans, against the published profile.
struct TruthLedger {
  uint32_t spans = 0;
  double profile_time_s = 0;
  double time_s = 0;  ///< true
  double profile_energy_j = 0;
  double energy_j = 0;  ///< true, gross (idle power included)
  TruthEffects time_by;
  TruthEffects energy_by;
  double peak_temperature_c = 0;
  double throttled_s = 0;  ///< time spent throttled in these spans

  void add(const OpRun& run);
  /// The mean of `iterations` passes over the same steps: every sum divided by it (the peak
  /// temperature stays the run's). Unchanged for 0 or 1.
  [[nodiscard]] TruthLedger per_iteration(uint32_t iterations) const;
};

/// Predicted against measured, taken apart: measured - predicted = (profile - predicted) [the
/// costs planned on against the published profile] + each effect of the truth model +
/// (measured - true) [measurement and attribution]. Each term is a fraction of `predicted`.
struct ErrorBreakdown {
  double total = 0;       ///< measured / predicted - 1
  double costs = 0;       ///< (profile - predicted) / predicted
  TruthEffects effects;   ///< each effect / predicted
  double measurement = 0; ///< (measured - true) / predicted
};
enum class Quantity { kTime, kEnergy };
/// Zero when `predicted` is not positive.
ErrorBreakdown break_down_error(const TruthLedger& truth, Quantity quantity, double predicted,
                                double measured);

}  // namespace ergon::devices
