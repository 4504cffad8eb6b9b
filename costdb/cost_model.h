#pragma once

// A board's measured costs as a model the planner can ask about any op: the exact
// measurement where one exists at that shape, a regression fitted to the board's measurements
// elsewhere (DESIGN.md, costdb).

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costdb/costs.h"

namespace ergon::costdb {

/// y = c0 + c1 x1 + c2 x2, or with `roofline` y = c0 + max(c1 x1, c2 x2) (an op is bound by
/// its arithmetic or by its memory traffic, not by their sum), every coefficient >= 0,
/// fitted by non-negative least squares on relative errors (each row weighted by 1 / y, so
/// small ops count as much as large ones).
struct LinearFit {
  std::array<double, 3> coef{};
  bool roofline = false;
  int rows = 0;
  /// Leave-one-out cross-validated relative error |predicted - measured| / measured.
  double cv_median = 0;
  double cv_max = 0;
  [[nodiscard]] double predict(double x1, double x2) const {
    return coef[0] + (roofline ? std::max(coef[1] * x1, coef[2] * x2) : coef[1] * x1 + coef[2] * x2);
  }
};

enum class FitShape { kLinear, kRoofline };

/// Rewrites the board's paging_costs rows (derived) from its attributed page-in and page-out
/// costs in every run: one row per measured size and direction, with the latency and
/// bandwidth of the direction's fit over all sizes and the energy per byte at that size.
/// Directions with fewer than three sizes get no rows. Returns the rows written.
int rebuild_paging_costs(Database& db, const std::string& board_kind);

/// Rewrites the board's link_costs rows (derived) from its attributed link transfers (runs of
/// ergon record --link-test): per link kind, power mode and direction, a fit of time against
/// bytes over every measured size (its slope the bandwidth, half its intercept the one-way
/// latency) and, where power samples covered every size, of net energy (above idle) against
/// bytes. One row per size. Directions with fewer than three sizes get no rows. Returns the
/// rows written.
int rebuild_link_costs(Database& db, const std::string& board_kind);

/// What a board's link of one kind costs in one direction, as link_costs has it.
struct LinkCostFit {
  std::string board_kind;
  std::string link;
  std::string power_mode;  ///< empty when the runs did not say
  std::string direction;   ///< "send" (board to host) or "receive"
  double latency_s = 0;    ///< one way: half the fitted fixed cost of a transfer
  double bandwidth_bytes_per_s = 0;
  std::optional<double> energy_j_per_byte;  ///< above idle; none without power samples
  int sizes = 0;
  int runs = 0;  ///< most runs that measured one of its sizes
};
/// Every link fit in link_costs, of one board kind or all.
std::vector<LinkCostFit> list_link_costs(Database& db, const std::optional<std::string>& board_kind);

/// Fits rows (x1, x2, y); nullopt with fewer than 3 rows. The roofline fit alternates between
/// assigning each row to the term that bounds it and refitting, until the assignment holds.
std::optional<LinearFit> fit_non_negative(std::span<const std::array<double, 3>> rows,
                                          FitShape shape = FitShape::kLinear);

/// Where MeasuredCosts takes a shape's costs from.
enum class TimedIn {
  kProfile,    ///< the profile plan's windows (ergon record)
  /// The executed store-all schedule's compute steps and the page-all schedule's transfers
  /// where they ran the shape, else the profile's.
  kIteration,
};

/// One board's costs from op_costs: per repetition, gross energy (the board's whole power,
/// idle included, as the planner's graphs count it), where power samples measured it. Time is a roofline fitted to the
/// measured ops; energy is that time x the board's power while running ops of the same bound
/// (compute-bound ops draw more than memory-bound ones), or while paging.
class MeasuredCosts {
 public:
  /// Measurements over fewer samples than this (in all of a shape's windows) are left out.
  static constexpr uint32_t kMinSamplesPerShape = 50;

  /// Every attributed op of board kind `board` in the database, from the runs in
  /// `power_mode` (costs differ by mode). Without a mode, the board's runs must all be in one
  /// (or not say). Throws InputError when there are too few to fit (fewer than 3 compute ops,
  /// or no page-in or page-out of 2 sizes), or when a mode must be chosen.
  /// `source` TimedIn::kIteration: where executions of the store-all schedule on real tensors
  /// (`ergon validate --execute --port --budget 100%`, runs.plan 'execute', no step
  /// recomputed or paged) timed a shape inside training iterations, the latest one's time
  /// (the highest run id that ran the shape) stands for the shape instead of the profile's.
  /// Paging likewise, from executions of the page-all schedule (`ergon validate --execute
  /// --port --planner page-all`, planner::plan_page_all: every activation paged, each
  /// transfer after the compute an iteration runs before it); shapes no such iteration ran
  /// keep the profile's. Other schedules that recompute or page are what validations
  /// measure: their steps are never costs, so no prediction is made from its own schedule's
  /// measurements. A profile times each shape in
  /// a window of its own, run after run; inside an iteration it runs among its neighbours
  /// (docs/accuracy.md, "Costs measured inside an iteration"). A step's energy is never its own reading (it runs once per iteration, too
  /// short for a power monitor's samples): it is the step's time at the profile's power for
  /// that shape, or for its class where the profile did not run the shape.
  static MeasuredCosts from_database(Database& db, const std::string& board,
                                     const std::optional<std::string>& power_mode = std::nullopt,
                                     TimedIn source = TimedIn::kProfile);
  /// How many shapes' costs came from executed iterations (TimedIn::kIteration).
  [[nodiscard]] int iteration_shapes() const { return iteration_shapes_; }
  /// Of those, the page-ins' and page-outs' sizes (timed by executions of page-all).
  [[nodiscard]] int iteration_paging_shapes() const { return iteration_paging_shapes_; }
  /// The power mode the costs were measured in (empty when the runs did not say).
  [[nodiscard]] const std::string& power_mode() const { return power_mode_; }

  struct Cost {
    double time_s = 0;
    double energy_j = 0;
    bool measured = false;  ///< an exact measurement at this shape, not the regression
    /// 1 sigma of energy_j: a measured shape's spread over its repetitions (independent from
    /// shape to shape); the regression's cross-validated median error otherwise (shared by
    /// every shape the fit serves).
    double energy_sigma_j = 0;
  };

  /// An op of `flops` that reads and writes `bytes` in `phase` (time ~ flops and bytes, energy
  /// likewise): the measurement of that shape in that phase where there is one (an op's
  /// backward pass may match its forward pass's counts and cost more), else the fit.
  [[nodiscard]] Cost compute(profiler::Phase phase, uint64_t flops, uint64_t bytes) const;
  /// A forward op's.
  [[nodiscard]] Cost compute(uint64_t flops, uint64_t bytes) const {
    return compute(profiler::Phase::kForward, flops, bytes);
  }
  /// Moving `bytes` to (page-out) or from (page-in) storage: latency + bytes / bandwidth.
  [[nodiscard]] Cost page_in(uint64_t bytes) const;
  [[nodiscard]] Cost page_out(uint64_t bytes) const;
  /// Board power with nothing running: the median over the runs that measured it (their idle
  /// windows or gaps; a schedule run has neither).
  [[nodiscard]] double idle_power_w() const { return idle_power_w_; }

  /// Power while running, by what bounds the op, with the energy model's leave-one-out
  /// cross-validated relative error.
  struct PowerModel {
    double compute_bound_w = 0;
    double memory_bound_w = 0;
    double cv_median = 0;
    double cv_max = 0;
  };

  [[nodiscard]] const LinearFit& compute_time_fit() const { return compute_time_; }
  [[nodiscard]] const PowerModel& compute_power() const { return compute_power_; }
  [[nodiscard]] const LinearFit& pagein_time_fit() const { return pagein_time_; }
  [[nodiscard]] const LinearFit& pageout_time_fit() const { return pageout_time_; }
  [[nodiscard]] double pagein_power_w() const { return pagein_power_w_; }
  [[nodiscard]] double pageout_power_w() const { return pageout_power_w_; }
  [[nodiscard]] int measured_ops() const { return static_cast<int>(rows_.size()); }
  /// Whether the costs carry energy: compute, page-in and page-out were all measured with power
  /// samples. When not (a board recorded without a power probe), the costs are times only:
  /// every Cost's energy_j is 0 and means nothing, the power model is empty, and energy has
  /// to come from a stated power model or not be planned at all.
  [[nodiscard]] bool has_energy() const { return has_energy_; }
  [[nodiscard]] int runs() const { return runs_; }

  /// How much of an op's data a board's caches keep, as a profile's cache ladder measured it
  /// (app::model_profile_plan: one memory-bound shape timed with its tensors cycled through
  /// k copies, k - 1 of them touched between two runs on one). A byte last touched `u` other
  /// bytes ago is still cached with probability 1 / (1 + (u / effective_bytes)^steepness):
  /// an LRU cache of effective_bytes when steepness is large, a softer edge where
  /// associativity, prefetchers and other tenants blur it. Fitted, not read from sysfs: the
  /// cache a core really gets is what matters (docs/accuracy.md, "The cache model").
  struct CacheCurve {
    double effective_bytes = 0;
    double steepness = 0;
    int points = 0;            ///< ladder entries (copies >= 2) fitted
    double rms_rel_error = 0;  ///< of the ladder's times under the fit
    std::string shape;         ///< the ladder's op (kind and bytes)
    /// The mean probability over a buffer of `size_bytes`, touched in order, that its bytes
    /// are still cached after `distance_bytes` other bytes were touched since.
    [[nodiscard]] double hit(double distance_bytes, double size_bytes) const;
  };
  /// The curve fitted to the board's cache ladder, on each call (a grid search of some tens
  /// of milliseconds, which planning, needing no curve, never pays). None when the board's
  /// profiles ran no cache ladder, or it did not fit.
  [[nodiscard]] std::optional<CacheCurve> cache() const;
  /// The op's time when a fraction `hit` of its bytes is in cache (`curve`'s hit, weighted
  /// by bytes): between its measurement from memory (copies 0, the rotation's own hit) and
  /// its warm measurement (copies 1), linear in the hit fraction. None without both
  /// measurements of this shape in this phase.
  [[nodiscard]] std::optional<double> time_at_hit(const CacheCurve& curve, profiler::Phase phase, uint64_t flops,
                                                  uint64_t bytes, double hit) const;
  /// Shapes measured warm as well as from memory.
  [[nodiscard]] int warm_ops() const { return static_cast<int>(warm_.size()); }

 private:
  struct Row {
    std::string kind;
    profiler::Phase phase = profiler::Phase::kForward;
    uint64_t flops = 0;
    uint64_t bytes = 0;  ///< read + written; for paging, moved
    double time_s = 0;
    std::optional<double> energy_j;  ///< none: measured without power samples
    double energy_sigma_j = 0;       ///< of the mean over the runs that measured the shape
  };
  [[nodiscard]] std::optional<Cost> exact(bool paging, profiler::Phase phase, uint64_t flops,
                                          uint64_t bytes) const;
  [[nodiscard]] Cost paging(profiler::Phase phase, uint64_t bytes, const LinearFit& time,
                            double power_w) const;
  /// Times of the entries with copies != 0, by (kind, phase, flops, bytes, copies): keeps the
  /// warm ones and the longest ladder's points for cache().
  void keep_cache_entries(
      const std::map<std::tuple<std::string, int, uint64_t, uint64_t, uint16_t>, std::vector<double>>& cached);

  std::vector<Row> rows_;
  /// Warm times (copies 1) by (phase, flops, bytes).
  std::map<std::tuple<int, uint64_t, uint64_t>, double> warm_;
  /// The cache ladder: (bytes touched since, time) for its default rotation, warm and each
  /// entry of copies >= 2, the op's own bytes, its entries of copies >= 2, and what op it is.
  struct Ladder {
    std::vector<std::pair<double, double>> points;
    double bytes = 0;
    int entries = 0;
    std::string shape;
  };
  std::optional<Ladder> ladder_;
  LinearFit compute_time_;
  PowerModel compute_power_;
  LinearFit pagein_time_, pageout_time_;
  double pagein_power_w_ = 0, pageout_power_w_ = 0;
  double idle_power_w_ = 0;
  bool has_energy_ = false;
  std::string power_mode_;
  int runs_ = 0;
  int iteration_shapes_ = 0;
  int iteration_paging_shapes_ = 0;
};

/// Fits a cache curve to one op timed at several reuse distances: `points` are (bytes of other
/// data touched since the op's own data was last touched, time), `bytes` the op's own data;
/// the time is taken as linear in the share cached (MeasuredCosts::CacheCurve). Its `points`
/// and `rms_rel_error` are over all the points; nullopt with fewer than 3, or when no curve
/// on the grid tells them apart.
std::optional<MeasuredCosts::CacheCurve> fit_cache_curve(std::span<const std::pair<double, double>> points,
                                                         double bytes);

}  // namespace ergon::costdb
