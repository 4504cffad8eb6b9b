#pragma once

// Pipelined training across several boards: a model's forward ops split into contiguous
// stages, one per board, each stage trained on its board with its own remat/paging schedule,
// K micro-batches flowing through (1F1B or GPipe), activations forward and gradients back
// over links. This file holds what needs no board: where a graph may be cut, a stage's
// training graph, the timeline of K micro-batches, and the search for the split
// (docs/pipeline.md). app/pipeline.h costs stages on boards and links.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::planner {

/// A place to cut: stage boundary before forward op `op` (1 <= op < ops), where the output of
/// op - 1 is the only tensor crossing. `bytes`: that activation, and its gradient coming back.
struct CutPoint {
  int op = 0;
  uint64_t bytes = 0;
};

/// Every boundary where exactly one activation crosses: no op from `op` on reads an op before
/// op - 1 or the data batch. Residual blocks and attention layers are never cut inside.
std::vector<CutPoint> cut_points(const ForwardGraph& forward);

/// The forward graph of ops [first, end): op first - 1's output becomes the stage's input
/// (the data batch for first = 0). InputError when the range is empty or crosses more than one
/// tensor at either end.
ForwardGraph stage_forward(const ForwardGraph& forward, int first, int end);

/// A stage's training graph on one board. The last stage (end = ops) ends with the loss; any
/// other with a "receive gradient" node in the loss's place (no compute: the link's time and
/// energy are charged to the link, not the board), whose output is the gradient of the
/// stage's last activation. A stage after the first computes the gradient of its input (its
/// first ops' backward nodes output it, to be sent back); the first does not (the data batch
/// needs none). Fixed bytes are the stage's own parameters, gradients and optimizer state.
TrainingGraph build_stage_graph(const ForwardGraph& forward, int first, int end, const CostModel& costs,
                                int optimizer_copies = 1);

/// Where a stage's schedule hands its activation on: the step at which simulate() takes the
/// stash (ScheduleReport::stash_step). Steps before it are the micro-batch's forward part,
/// the rest its backward part (recomputations for it included). InputError for a schedule
/// the simulator rejects.
std::size_t backward_part_begins(const TrainingGraph& graph, const Schedule& schedule);

/// How micro-batches take turns on a board.
/// k1F1B (PipeDream-Flush): stage s runs S - 1 - s forwards, then alternates one forward and
/// one backward, then finishes the backwards; at most S - s micro-batches are in flight.
/// kGPipe: every forward, then every backward; all K micro-batches are in flight.
enum class PipelineOrder { k1F1B, kGPipe };
std::string to_string(PipelineOrder order);
/// "1f1b" or "gpipe"; InputError otherwise.
PipelineOrder parse_pipeline_order(const std::string& text);

/// Micro-batches stage `stage` of `stages` holds at once (their stashes coexist).
int in_flight(int stage, int stages, int microbatches, PipelineOrder order);

/// One micro-batch's work on a stage's board.
struct StageTimes {
  double forward_s = 0;
  double backward_s = 0;
};

/// A link between two consecutive stages: one transfer of `bytes` takes
/// latency_s + bytes / bytes_per_s. Full duplex: activations and gradients move at once;
/// half duplex: one transfer at a time.
struct LinkModel {
  uint64_t bytes = 0;  ///< the activation (and its gradient) crossing per micro-batch
  double bytes_per_s = 0;
  double latency_s = 0;
  bool full_duplex = true;
  [[nodiscard]] double transfer_s() const { return latency_s + static_cast<double>(bytes) / bytes_per_s; }
};

/// A span of the timeline: a board computing a micro-batch's forward or backward, or a link
/// moving its activation or gradient.
struct PipelineTask {
  enum class Kind { kForward, kBackward, kActivation, kGradient };
  Kind kind = Kind::kForward;
  int stage = 0;  ///< the board; for a transfer, the link's upstream stage (link s joins s and s + 1)
  int microbatch = 0;
  double start_s = 0;
  double end_s = 0;
};
std::string to_string(PipelineTask::Kind kind);

struct PipelineTimeline {
  double makespan_s = 0;
  std::vector<PipelineTask> tasks;       ///< in the order they were placed
  std::vector<double> busy_s;            ///< per stage: forward and backward time
  [[nodiscard]] double bubble_fraction(int stage) const {
    return makespan_s > 0 ? 1 - busy_s[static_cast<std::size_t>(stage)] / makespan_s : 0;
  }
};

/// The timeline of `microbatches` micro-batches: each board works through its order, one task
/// at a time; a forward waits for its activation, a backward for its forward and its
/// gradient; a link carries its transfers in micro-batch order. `links` has stages - 1 entries.
PipelineTimeline simulate_pipeline(const std::vector<StageTimes>& stages, const std::vector<LinkModel>& links,
                                   int microbatches, PipelineOrder order);

/// What one stage costs on its board, as the board's planner found it (app/pipeline.h).
struct StageCost {
  bool feasible = false;
  std::string why;  ///< why not, when not
  StageTimes times;
  double dynamic_j = 0;  ///< one micro-batch's energy above the board's idle power
  /// False: a lower bound (each time and the energy at most the stage's best schedule's),
  /// from a bound evaluator; best_split costs it exactly where a best split uses it.
  bool exact = true;
};

/// What crossing one cut costs per micro-batch (activation forward, gradient back).
struct LinkCost {
  double bytes_per_s = 0;
  double latency_s = 0;
  bool full_duplex = true;
  double tx_j_per_byte = 0;  ///< above idle, the sending board
  double rx_j_per_byte = 0;  ///< above idle, the receiving board
};

struct SplitRequest {
  int ops = 0;                          ///< forward ops of the model
  std::vector<CutPoint> cuts;           ///< where it may be cut (cut_points())
  int microbatches = 1;
  PipelineOrder order = PipelineOrder::k1F1B;
  std::vector<double> idle_w;           ///< per stage (board): charged over the whole makespan
  std::vector<LinkCost> links;          ///< per link: stages - 1 entries
  double deadline_s = std::numeric_limits<double>::infinity();  ///< per batch
  bool throughput = false;              ///< least time per batch instead of least energy
  /// Called as stage costs are found: (done, total).
  std::function<void(std::size_t, std::size_t)> progress;
  /// Stop evaluating stages then (the best split among those evaluated stands).
  std::function<bool()> out_of_time;
  /// Up to this many possible splits, every one is simulated (the answer is exact); beyond,
  /// the dynamic program chooses which.
  std::size_t exhaustive_limit = 20000;
  [[nodiscard]] int stages() const { return static_cast<int>(idle_w.size()); }
};

/// A split, predicted: boundaries (stages + 1 entries, 0 first and ops last), the timeline
/// and the energy of one batch (K micro-batches).
struct SplitPrediction {
  std::vector<int> bounds;
  std::vector<StageCost> stages;
  PipelineTimeline timeline;
  double makespan_s = 0;
  double compute_j = 0;  ///< every board's energy above idle
  double idle_j = 0;     ///< every board's idle power over the makespan
  double link_j = 0;     ///< both ends of every transfer, above idle
  [[nodiscard]] double energy_j() const { return compute_j + idle_j + link_j; }
};

/// The cost of stage `stage` over forward ops [first, end).
using StageEvaluator = std::function<StageCost(int stage, int first, int end)>;

/// Predicts `bounds` (infeasible stages make it nullopt and `why` says which).
std::optional<SplitPrediction> predict_split(const SplitRequest& request, const std::vector<int>& bounds,
                                             const StageEvaluator& evaluate, std::string* why = nullptr);

struct SplitResult {
  std::optional<SplitPrediction> best;
  std::string why;  ///< no split: the reason
  std::size_t stages_evaluated = 0;
  std::size_t splits_simulated = 0;
  std::size_t stages_refined = 0;  ///< stages costed exactly after a bound
  bool exhaustive = false;     ///< every split was simulated
  bool stopped_early = false;  ///< out_of_time stopped the evaluation
};

/// The split of least energy per batch (or least time with `throughput`) within the deadline.
/// Every contiguous stage on every board is costed once (memoised). Where there are at most
/// `exhaustive_limit` splits, each is simulated and the best is exact. Otherwise a dynamic
/// program over cut points finds, for each cap on the slowest stage's and link's per-micro-batch time, the
/// split least in energy under the 1F1B/GPipe estimate
///   makespan ~ sum of stage and link times + (K - 1) x cap,
/// each such split's timeline is simulated exactly, and moving any one cut to a neighbouring
/// point is tried until nothing improves.
///
/// With `bound`, every stage is first costed by `bound` (exactly, or by a lower bound marked
/// inexact, e.g. store-all's costs where store-all does not fit); `evaluate` then costs
/// exactly the inexact stages of the best split, and the search repeats until the best split
/// is costed exactly. Times and energies only grow from a bound, so the answer is the same.
SplitResult best_split(const SplitRequest& request, const StageEvaluator& evaluate,
                       const StageEvaluator& bound = {});

/// The split with stages as equal in forward op count as the cut points allow (a baseline).
std::vector<int> equal_split(const SplitRequest& request);

}  // namespace ergon::planner
