#pragma once

// Running a planned pipeline on boards: each board its stage's schedule, micro-batch by
// micro-batch in the timeline's order, activations and gradients relayed through the host as
// tagged link transfers (protocol v6); then predicted against measured, per board and in
// total (ergon pipeline --validate, docs/pipeline.md).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/pipeline.h"
#include "devices/profile_plan.h"

namespace ergon::app {

/// What each board runs: an idle window (its idle power, which the energies are net of),
/// then for every forward and backward of a micro-batch on its stage, in the timeline's
/// order: the activation received (stages after the first), the schedule's forward part,
/// the activation sent on (stages before the last); the gradient received in the place of
/// the stage's receive-gradient node, the schedule's backward part, the input's gradient sent
/// back. A transfer's tag names its link, micro-batch and direction, the same on both boards.
std::vector<devices::ProfilePlan> pipeline_board_plans(const PipelineOutcome& o, uint32_t idle_us = 200'000);

/// A board's plan and, for an agent executing its stage on real tensors, the steps behind
/// it: the stage schedule's steps per micro-batch (the micro-batch in a node's top 8 bits;
/// frees included, which have no plan entry) and the transfers (kinds 4 send, 5 receive,
/// their tag as node), one timed step per plan entry after the idle window.
struct PipelineBoardRun {
  devices::ProfilePlan plan;
  std::vector<std::pair<uint8_t, uint32_t>> steps;
};
std::vector<PipelineBoardRun> pipeline_board_runs(const PipelineOutcome& o, uint32_t idle_us = 200'000);

/// The tag of link `link`'s transfer of micro-batch `microbatch`, activation or gradient.
uint32_t pipeline_transfer_tag(int link, int microbatch, bool gradient);

struct PipelineRunRequest {
  /// One port per board, in stage order; empty: a simulated board per stage on a pty, paced
  /// at `speed` (its time must be real time for one board's waiting to be another's).
  std::vector<std::string> ports;
  double speed = 1;
  std::string db = "ergon.db";  ///< runs go here (recorded as schedule runs: no costs)
  uint64_t seed = 1;
  /// Each board (an ergon-agent per port) executes its stage on real tensors, the
  /// activations and gradients themselves relayed; then every stage's parameter gradients
  /// are compared with a single-process store-all run of the whole model (zoo models).
  bool execute = false;
  /// Each increment asks the boards to stop (Ctrl-C); none: not interruptible.
  const std::atomic<int>* interrupts = nullptr;
};

/// One board's share of the batch, predicted against measured.
struct PipelineBoardResult {
  std::string board;
  int64_t run_id = 0;
  double predicted_busy_s = 0;     ///< K x (forward + backward) of its stage
  double measured_busy_s = 0;      ///< its compute steps' spans, summed
  double predicted_dynamic_j = 0;  ///< K x the stage's energy above idle
  std::optional<double> measured_dynamic_j;  ///< its compute steps' net energy (none: no power samples)
  double measured_transfer_s = 0;  ///< its link spans, waits for the upstream board included
  double measured_link_j = 0;      ///< their net energy (above idle) where samples covered them
  double idle_w = 0;               ///< as measured in its idle window
  double first_ns = 0, last_ns = 0;  ///< host time of its first step's start and last step's end
  int steps = 0, steps_arrived = 0;
};

struct PipelineRunResult {
  PipelineOutcome plan;
  std::vector<PipelineBoardResult> boards;
  double predicted_makespan_s = 0;
  double measured_makespan_s = 0;  ///< first step on any board to last step on any, host time
  double predicted_energy_j = 0;   ///< the plan's energy per batch (a lower bound where link energy is missing)
  /// Every board's measured energy over the makespan: its steps' gross energy plus its idle
  /// power over the rest; none when a board had no power samples.
  std::optional<double> measured_energy_j;
  std::string incomplete;  ///< set when a board's run did not complete (its figures are of what arrived)
  /// With `execute`: per stage, whether its gradients over every micro-batch equal the
  /// single-process store-all run's bit for bit (none: the board sent no report).
  std::vector<std::optional<bool>> gradients_equal;
  [[nodiscard]] bool all_gradients_equal() const {
    return !gradients_equal.empty() &&
           std::all_of(gradients_equal.begin(), gradients_equal.end(), [](const auto& g) { return g && *g; });
  }
};

enum class PipelineRunPhase { kPlanning, kRunning, kAttributing };

/// Plans args (as ergon pipeline), runs the plan on the boards, attributes each board's run.
/// InputError when the plan has no split; DeviceError when a board cannot be reached.
PipelineRunResult run_pipeline(const PipelineArgs& args, const PipelineRunRequest& request,
                               const std::function<void(PipelineRunPhase)>& progress = {});

}  // namespace ergon::app
