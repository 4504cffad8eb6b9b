#pragma once

// What the dashboard's views show, built without Qt so tests run without a display: the
// Pareto fronts of the stored plans, a schedule as the POET paper's stage x node grid, its
// memory over time against the budget, a run's power trace with its op spans, and the cost
// table. The widgets (gui/widgets) only draw these.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costdb/costs.h"
#include "costdb/database.h"
#include "costdb/plans.h"
#include "gui/model/decimate.h"
#include "planner/graph.h"
#include "planner/pipeline.h"
#include "planner/schedule.h"

namespace ergon::gui {

// ---- Pareto explorer ----

/// What a graph's memory is made of, to place a budget: the fixed bytes (parameters,
/// gradients, optimizer state) that a budget under the total objective includes, and the
/// activations store-all keeps at its peak.
struct MemoryBasis {
  uint64_t fixed_bytes = 0;
  uint64_t store_all_bytes = 0;
};
struct ParetoPoint {
  int64_t plan_id = 0;
  uint64_t budget_bytes = 0;
  /// The budget's activations: the budget less the fixed bytes it includes (when its graph's
  /// basis is known; else the budget).
  uint64_t activation_bytes = 0;
  /// activation_bytes as a percentage of store-all's (when the basis is known).
  std::optional<double> percent_of_store_all;
  double energy_j = 0;  ///< the simulator's replay
  double time_s = 0;
  bool on_front = false;  ///< no other plan of the series is as cheap at a budget as small
};
struct ParetoSeries {
  std::string planner;
  std::vector<ParetoPoint> points;  ///< by budget
};
/// The plans of one graph (digest; empty: the model, board and objective planned most
/// recently, in every power mode) that have a schedule, one series per planner and power
/// mode ("poet", "poet@MAXQ"), with an optional deadline filter (plans made without a
/// deadline always pass; others when theirs is at most `deadline_s`).
/// `basis` (by graph digest) places each budget as activations and % of store-all.
std::vector<ParetoSeries> pareto_series(const std::vector<costdb::PlanRow>& plans,
                                        const std::string& graph_digest = {},
                                        std::optional<double> deadline_s = std::nullopt,
                                        const std::map<std::string, MemoryBasis>& basis = {});

// ---- Schedules ----

enum class Cell : uint8_t { kEmpty, kResident, kOnStorage, kCompute, kRecompute, kPageIn, kPageOut };

/// Stage t computes node t (and whatever it recomputes first); a cell says what happened to
/// node j in stage t: computed, recomputed, paged in or out, else kept in RAM or on storage.
struct ScheduleGrid {
  int stages = 0, nodes = 0;
  std::vector<Cell> cells;  ///< row-major [stage][node]
  [[nodiscard]] Cell at(int stage, int node) const {
    return cells[static_cast<std::size_t>(stage) * static_cast<std::size_t>(nodes) + static_cast<std::size_t>(node)];
  }
};
ScheduleGrid schedule_grid(const planner::TrainingGraph& graph, const planner::Schedule& schedule);

/// Activation memory after each step (as the simulator counts it: after a compute allocates
/// its output, before frees), for the memory timeline.
std::vector<uint64_t> memory_timeline(const planner::TrainingGraph& graph, const planner::Schedule& schedule);

struct ScheduleTotals {
  double energy_j = 0, time_s = 0;
  uint64_t peak_bytes = 0;
  int recomputes = 0, page_ins = 0, page_outs = 0;
};
ScheduleTotals schedule_totals(const planner::TrainingGraph& graph, const planner::Schedule& schedule);

// ---- Power trace ----

struct Band {
  double begin_s = 0, end_s = 0;
  profiler::Phase phase = profiler::Phase::kForward;
  uint32_t op_id = 0;
};
/// A run's power samples (seconds from the run's first sample, watts, per rail) and its op
/// spans as bands on the same time axis.
struct PowerTrace {
  std::map<uint8_t, std::vector<double>> t_s, power_w;  ///< by rail
  std::map<uint8_t, std::string> rail_names;             ///< "VDD_IN", "5V" (load_power_trace)
  std::vector<Band> bands;
  double duration_s = 0;
};
PowerTrace power_trace(const costdb::RunData& run);
PowerTrace load_power_trace(costdb::Database& db, int64_t run_id);

// ---- Recording ----

/// What a recording board's link counted so far (the Record tab's counters line).
struct RecordCounters {
  uint64_t samples = 0;
  double samples_per_s = 0;
  uint64_t spans = 0;
  uint64_t frames_lost = 0;
  uint64_t crc_errors = 0;
  uint64_t committed = 0;
};

// ---- Pipelines ----

/// A pipeline's timeline as lanes of bars: each board's forwards and backwards, and under it
/// the link to the next board with its activations and gradients.
struct GanttBar {
  int lane = 0;
  double start_s = 0, end_s = 0;
  planner::PipelineTask::Kind kind = planner::PipelineTask::Kind::kForward;
  int microbatch = 0;
};
struct Gantt {
  std::vector<std::string> lanes;  ///< top to bottom: board 0, link 0, board 1, ...
  std::vector<GanttBar> bars;
  double makespan_s = 0;
};
/// `boards[s]` names stage s's lane and `links[s]` the link after it (stages - 1 of them).
Gantt pipeline_gantt(const planner::PipelineTimeline& timeline, const std::vector<std::string>& boards,
                     const std::vector<std::string>& links);

}  // namespace ergon::gui
