#pragma once

// `ergon pipeline`: a model split over several boards, each stage planned on its board
// (docs/pipeline.md).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/pipeline.h"
#include "planner/poet.h"
#include "planner/schedule.h"

namespace ergon::app {

struct PipelineArgs {
  std::string model;
  std::string onnx_file;
  std::vector<std::string> onnx_inputs;
  int batch = 1;                        ///< samples per micro-batch
  std::vector<std::string> boards;      ///< one per stage, in pipeline order
  std::vector<std::string> links;       ///< boards - 1 link kinds; empty: devices::default_link
  int microbatches = 4;                 ///< per batch
  std::string order = "1f1b";           ///< or gpipe
  /// One budget for every board or one per board: bytes ("512KiB") or a percentage of the
  /// board's RAM; empty: each board's RAM.
  std::vector<std::string> budgets;
  std::string deadline = "none";        ///< per batch, seconds ("2.5s") or none
  bool throughput = false;              ///< least time per batch instead of least energy
  /// Each stage's planner: poet (recompute and page) or store-all (neither: a baseline).
  std::string planner = "poet";
  std::string db;                       ///< measured costs, per board kind, where it has them
  /// One mode for every board or one per board; "auto": each board in the mode that weighs
  /// least for its stage; empty: each board's default (or only measured) mode.
  std::vector<std::string> power_modes;
  /// A link energy for links whose published figures have none (J per byte, each end).
  std::optional<double> link_energy_j_per_byte;
  double time_limit_s = 60;             ///< the whole command
  int threads = 2;
};

/// A stage as planned: its board, its ops, its schedule for one micro-batch and its memory.
struct PipelineStage {
  std::string board;
  std::string power_mode;   ///< the mode its costs are in (empty: the board's default)
  std::string cost_source;  ///< which costs, in words
  int first_op = 0, end_op = 0;
  std::string first_name, last_name;
  int in_flight = 1;                 ///< micro-batches whose stashes it holds at once
  uint64_t budget_bytes = 0;         ///< the board's
  uint64_t fixed_bytes = 0;          ///< its parameters, gradients and optimizer state
  uint64_t input_bytes = 0;          ///< the activation it receives (0 for the first stage)
  uint64_t peak_bytes = 0;           ///< one micro-batch's activations at their peak
  uint64_t stash_bytes = 0;          ///< what a micro-batch keeps between its passes
  /// fixed + in_flight x input + peak + (in_flight - 1) x stash: at most budget_bytes.
  uint64_t memory_bytes = 0;
  std::string planner;               ///< which planner's schedule (store-all when it fit)
  double gap = 0;                    ///< its proven gap (0 for store-all: no schedule costs less)
  planner::ScheduleReport sim;       ///< the simulator's replay of one micro-batch
  planner::Schedule schedule;
  planner::TrainingGraph graph;      ///< the stage's training graph on its board
  int nodes = 0;
  double idle_w = 0;
};

struct PipelineLink {
  std::string kind;
  uint64_t bytes = 0;                ///< per micro-batch each way
  double transfer_s = 0;             ///< one transfer
  std::optional<double> energy_j_per_byte;  ///< both ends, above idle; unset: not published
  std::vector<std::string> sources;
};

struct PipelineOutcome {
  std::string model;
  std::shared_ptr<const planner::ForwardGraph> forward;  ///< the whole model
  int ops = 0;
  std::vector<planner::CutPoint> cuts;
  std::vector<PipelineStage> stages;
  std::vector<PipelineLink> links;
  planner::SplitPrediction prediction;
  /// Links whose energy nothing published gives: the energy is a lower bound by their part.
  std::vector<std::string> missing_link_energy;
  std::size_t stages_evaluated = 0;
  std::size_t splits_simulated = 0;
  std::size_t stages_refined = 0;  ///< planned exactly after store-all's bound
  bool stopped_early = false;
  double wall_s = 0;
  std::string order;
  int microbatches = 1;
};

struct PipelineProgress {
  std::function<void(std::size_t done, std::size_t total)> on_stage;
};

/// Splits the model over args.boards and predicts one batch. InputError naming the cause when
/// no split exists (a part of the model no board holds, or a deadline no split meets).
PipelineOutcome plan_pipeline(const PipelineArgs& args, const PipelineProgress& progress = {});

/// What running a planned pipeline on real tensors gave: each micro-batch through every
/// stage in the timeline's order (activations handed on, gradients handed back, each stage
/// running its own schedule with real paging), against the whole model's store-all run on
/// the same micro-batch.
struct GradientCheck {
  int microbatches = 0;
  int stages = 0;
  int parameter_tensors = 0;      ///< ops with parameters x micro-batches: gradients compared
  int mismatches = 0;             ///< of those, not equal bit for bit
  std::string first_mismatch;     ///< "micro-batch 2, op layer1.0.conv1"
  double wall_s = 0;
  [[nodiscard]] bool equal() const { return mismatches == 0; }
};
/// Runs `o` (zoo models only: the kernels need tensor shapes) in one process, paging under
/// `scratch`. InputError for a model that cannot be executed.
GradientCheck check_gradients(const PipelineOutcome& o, const std::string& scratch);

/// The same pipeline with a given split, a baseline's: `starts` are the forward ops where
/// stages 1.. begin (boards - 1 of them, rising). InputError where a stage does not fit or
/// the model cannot be cut there.
PipelineOutcome predict_pipeline(const PipelineArgs& args, const std::vector<int>& starts);
/// The starts of the split with stages as equal in op count as the cut points allow.
std::vector<int> equal_starts(const PipelineArgs& args);

}  // namespace ergon::app
