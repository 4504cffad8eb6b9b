#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/plan.h"
#include "devices/truth_model.h"
#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::app {

struct ValidateRequest {
  PlanArgs plan;               ///< what to plan (plan.db is set from `db`)
  /// Validate this stored plan (e.g. from ergon pareto) instead of planning: its graph is
  /// rebuilt from its model and board (batch 1) and must match the stored digest.
  std::optional<int64_t> plan_id;
  std::string db = "ergon.db";  ///< measured costs come from here; plan, run and result go here
  std::string port;             ///< a board running the agent; empty: a simulated one on a pty
  /// Execute the schedule on real tensors (ergon-agent, a zoo model), then the store-all
  /// schedule, and compare their gradients. Without `port`, ergon-agent's code runs in this
  /// process on a pseudo-terminal, with a simulated INA219.
  bool execute = false;
  /// Timed iterations of the schedule, compared by their median (and its spread). None: 5
  /// on a board on a port or with `execute` (real kernels, whose iterations vary), 1 on a
  /// simulated board. A per-phase plan runs one (the board switches modes once).
  std::optional<int> iterations;
};

/// What the board reported after executing a schedule on real tensors.
struct ExecutedIteration {
  float loss = 0;
  uint64_t computes = 0, recomputes = 0;
  uint64_t paged_out_bytes = 0, paged_in_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t gradient_digest = 0;
};

/// A plan executed step by step on a board, predicted against measured.
struct ValidateOutcome {
  planner::TrainingGraph graph;
  planner::Schedule schedule;
  std::string cost_source;  ///< which costs the graph carries, in words
  std::string description;  ///< what was planned, for people
  int64_t plan_id = 0;
  int64_t run_id = 0;
  int steps = 0;              ///< computes and transfers executed per iteration
  int steps_timed = 0;        ///< whose spans arrived (in at least one iteration)
  int steps_attributed = 0;   ///< whose power samples arrived in every iteration timed
  int iterations = 1;         ///< timed iterations the board ran
  /// Each iteration whose every step's span arrived: its time (and gross energy, where
  /// every step's samples arrived), in the order run.
  std::vector<double> iteration_times_s;
  std::vector<double> iteration_energies_j;
  /// The steps' costs in the planner's graph, executed in order; none when the plan's
  /// objective is time (its graph carries no energy).
  std::optional<double> predicted_energy_j;
  /// The attributed gross energy of the steps, the median over the iterations; none unless
  /// every step's samples arrived in every complete iteration (a board without a power probe
  /// has none at all).
  std::optional<double> measured_energy_j;
  double predicted_time_s = 0;
  /// Where the board's measured costs carry a cache curve (a profile recorded with ergon
  /// record --model on a board with caches): the iteration again, each compute step timed at
  /// the fraction of its tensors still cached at that point of the schedule
  /// (planner::reuse_distances, costdb::MeasuredCosts::time_at_hit) instead of from memory.
  /// A second prediction beside the planner's own (predicted_time_s), not in its place:
  /// docs/accuracy.md, "The cache model", has what it is worth on real silicon so far.
  struct CacheModel {
    std::string description;  ///< the curve, in words
    int steps = 0;            ///< compute steps it timed
    double time_s = 0;
    std::optional<double> energy_j;  ///< each step's energy at the planner's power for it
  };
  std::optional<CacheModel> cache_model;
  /// The median of iteration_times_s; with no complete iteration, the first iteration's
  /// steps that arrived, summed.
  double measured_time_s = 0;
  /// Each step (plan entry) in order: its predicted time and, when its span arrived, measured
  /// (the median over the iterations it arrived in).
  struct StepTime {
    planner::StepKind kind = planner::StepKind::kCompute;
    std::string node;  ///< the training graph node's name
    bool recompute = false;  ///< a compute of a node already computed this iteration
    double predicted_s = 0;
    /// With the cache model: the fraction of the step's tensor bytes it expects in cache,
    /// and the step's time at that fraction.
    std::optional<double> cached_fraction;
    std::optional<double> cached_predicted_s;
    std::optional<double> measured_s;
  };
  std::vector<StepTime> step_times;
  /// Over the timed steps with a predicted time: |measured / predicted - 1|.
  double step_error_median = 0;
  double step_error_p95 = 0;
  /// Run on a simulated board of this process (no port): what its truth model made of the
  /// run against the published profile (devices::break_down_error says what the error is
  /// made of).
  std::optional<devices::TruthLedger> simulated_truth;
  std::string board;  ///< the board kind the schedule was planned for and run on
  uint64_t predicted_peak_bytes = 0;  ///< activation memory the simulator replayed
  /// With `execute`: the schedule's iteration and the store-all reference, as executed.
  std::optional<ExecutedIteration> executed, reference;
  int64_t reference_run_id = 0;
  /// With `execute`: the store-all reference, timed over as many iterations right after the
  /// schedule, on the same costs. Its error is how far the machine's own speed was from the
  /// costs' then; the schedule's time over store-all's, predicted against measured, leaves it
  /// out. None when no iteration of it arrived whole.
  struct ReferenceTime {
    double predicted_s = 0;
    double measured_s = 0;
  };
  std::optional<ReferenceTime> reference_time;
  /// Set when the run did not complete (how it ended): the figures are of what arrived.
  std::optional<std::string> run_incomplete;
  [[nodiscard]] bool gradients_match() const {
    return executed && reference && executed->gradient_digest == reference->gradient_digest &&
           executed->loss == reference->loss;
  }
};

/// What a validation is doing, as it starts each part.
enum class ValidatePhase {
  kPlanning,    ///< planning, or rebuilding a stored plan's graph
  kRunning,     ///< the board runs the schedule step by step
  kReference,   ///< with `execute`: the store-all schedule, for reference gradients and time
  kAttributing, ///< attributing the run and storing the validation
};
using ValidateProgress = std::function<void(ValidatePhase)>;

/// Plans (with the board's measured costs when `db` has them), sends the schedule to the
/// board as a schedule-mode run (one entry per compute, page-out and page-in, in order),
/// records and attributes it, and stores the plan, the run and a validations row. The board
/// executes one step at a time, so predicted time and energy are the schedule's sequential
/// sums (POET's accounting). Throws InputError when no schedule exists or the graph carries
/// no FLOP counts (a graph JSON file). With `execute`, the board runs the steps on real
/// tensors (see ValidateRequest::execute); InputError for a model that is not in the zoo.
ValidateOutcome validate(const ValidateRequest& args, const ValidateProgress& progress = {});

}  // namespace ergon::app
