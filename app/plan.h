#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/poet.h"
#include "planner/schedule.h"

namespace ergon::costdb {
enum class TimedIn;  // costdb/cost_model.h
}  // namespace ergon::costdb

namespace ergon::app {

class MeasuredCostModel;

struct PlanArgs {
  std::string model;
  std::string graph_file;
  std::string onnx_file;
  /// The ONNX file's data inputs, where the importer cannot tell them from weights given as
  /// graph inputs (empty: detect).
  std::vector<std::string> onnx_inputs;
  int batch = 1;
  std::string board = "pi4";
  std::string budget = "50%";
  std::string deadline = "none";
  std::string objective = "total";  ///< total, poet or time
  std::string planner = "poet";
  /// Bounds the whole plan: graph build, bounds, heuristics and solver (all modes with auto).
  double time_limit_s = 10;
  /// The relative optimality gap to prove; unset: choose_gap's default from the costs.
  std::optional<double> gap;
  int threads = 2;
  /// Cost database to take the board's measured costs from (empty: the board's profile).
  std::string db;
  /// The board's power mode (its costs differ by mode); empty: the measured runs' only mode,
  /// or the profile's default. "FWD/BWD": the forward pass in one mode and the backward pass
  /// in another (two switches per iteration). "auto": the least energy over the modes, and
  /// over per-phase pairs when switching takes under 5 % of a pass.
  std::string power_mode;
  /// Where measured costs come from (with `db`): "profile" (ergon record's windows), or
  /// "iteration": shapes that the store-all schedule timed inside training iterations take
  /// the latest such time (ergon validate --execute --port --budget 100%), at the profile's
  /// power, and paging the page-all schedule's transfers where one was executed (ergon
  /// validate --execute --port --planner page-all); the rest the profile's (costdb::TimedIn).
  std::string costs = "profile";
};

/// The measured costs that `args.costs` names; InputError for another word.
costdb::TimedIn timed_in(const PlanArgs& args);

/// Fills what the user left empty from the cost database `db` (may be empty or missing):
/// `board`: the only board kind with attributed costs in `db`, else pi4; `objective`: time
/// where that board's costs are times only and it has no published profile to take its
/// power from (a Linux host recorded without a power probe), else total. Returns one line per
/// choice taken from `db`, for people. InputError when `db` holds several boards and none was
/// named.
std::vector<std::string> fill_defaults(PlanArgs& args, const std::string& db);

/// "3000000", "2MiB", "1.5MB", "512KiB", or "50%" of `store_all_bytes`.
/// Throws InputError naming the text when it is none of those.
uint64_t parse_budget(const std::string& text, uint64_t store_all_bytes);
/// "1.3x" (of the single-pass time), "0.2s", or "none"; returns seconds (infinity for none).
double parse_deadline(const std::string& text, double single_pass_s);
/// "poet", "total" or "time"; throws InputError naming the known ones. Time plans under
/// total's model on time_objective_graph.
planner::Objective parse_objective(const std::string& text);
/// `--objective time`: the least iteration time (makespan) under the budget, energy not
/// planned. For costs that carry no energy (a board recorded without a power probe).
bool time_objective(const PlanArgs& args);
/// The graph with every energy replaced by its time at a constant 1 W, idle included: under
/// Objective::kTotal its energy in joules is the makespan in seconds.
planner::TrainingGraph time_objective_graph(planner::TrainingGraph graph);

/// No plan should prove a gap far below what its costs are known to.
inline constexpr double kProfileGap = 1e-3;     ///< published profiles: costs known to about 1 %
inline constexpr double kMinDefaultGap = 1e-3;  ///< measured costs: the floor of the default
inline constexpr double kMaxDefaultGap = 0.05;  ///< and its ceiling

/// The gap a plan proves, and why that one: --gap when given; on measured costs their 1 sigma
/// relative uncertainty in one pass's energy (within 0.1 % to 5 %); on published profiles
/// kProfileGap.
struct GapChoice {
  double gap = kProfileGap;
  std::string why;
};
GapChoice choose_gap(const PlanArgs& args, const planner::TrainingGraph& graph);

/// The request `ergon plan` and `ergon pareto` make of `args` on `graph`: budget in the
/// objective's terms (a percentage is of store-all's activation peak, with fixed bytes added
/// under total), deadline, limits. No progress callback.
planner::PlanRequest make_request(const PlanArgs& args, const planner::TrainingGraph& graph);

/// "MAXQ/MAXN": per-phase power modes (forward pass / backward pass); nullopt for one mode.
/// InputError for a malformed pair.
std::optional<std::pair<std::string, std::string>> split_phases(const std::string& power_mode);
/// How long the board takes to switch modes once: measured (args.db) or the profile's.
double mode_switch_s(const PlanArgs& args);
/// What per-phase modes (args.power_mode FWD/BWD, two different modes) add to an iteration
/// of `graph`: two switches, the board idling meanwhile. Zero for one mode.
struct ModeSwitches {
  double time_s = 0;
  double energy_j = 0;
};
ModeSwitches mode_switches(const PlanArgs& args, const planner::TrainingGraph& graph);

/// The training graph `ergon plan` and `ergon graph export` work on: a zoo model costed on a
/// board (its measured costs from args.db when it has them, else its published profile), or
/// a graph JSON file as it is. `cost_source`, when given, gets one line saying which costs
/// were used and why.
/// Whose costs a graph carries: decisions are made on this, never on the description.
enum class CostSource {
  kProfile,          ///< the board's published profile (no database asked for)
  kMeasured,         ///< the board's attributed measurements (args.db)
  kProfileFallback,  ///< measurements were asked for and could not be used: the profile (a warning)
  kGraphFile,        ///< as given in a training-graph JSON file
};

/// What a board's ops cost, as load_graph costs a model: its measured costs (args.db), else its
/// published profile in args.power_mode; `source`: the lines saying which, and why.
/// InputError where neither exists, or where the measured costs are times only and no power
/// model of the board exists (unless the objective is time).
struct BoardCosts {
  std::unique_ptr<planner::CostModel> model;
  std::string source;
  CostSource kind = CostSource::kProfile;
  const MeasuredCostModel* measured = nullptr;  ///< model, when it is the measured costs
};
BoardCosts board_costs(const PlanArgs& args);

/// `cost_source`, when given, gets the lines describing the costs; `source`, whose they are
/// (per-phase modes: the forward mode's, or kProfileFallback when either fell back).
planner::TrainingGraph load_graph(const PlanArgs& args, std::string* cost_source = nullptr,
                                  CostSource* source = nullptr);

/// Everything one `ergon plan` computes.
struct PlanOutcome {
  planner::TrainingGraph graph;
  std::string cost_source;  ///< which costs the graph carries, in words
  CostSource costs = CostSource::kProfile;
  GapChoice gap;  ///< the gap the plan was asked to prove, and why
  /// `--objective time`: the request is total's on time_objective_graph, so every "energy"
  /// of the result (objective, bound, the simulator's total) is the makespan in seconds.
  bool time_objective = false;
  planner::PlanRequest request;
  planner::PlanResult result;
  planner::ScheduleReport store_all;            ///< the reference every plan is compared to
  std::optional<planner::ScheduleReport> sim;   ///< the simulator's replay of the schedule
  std::vector<uint8_t> encoded;                 ///< the schedule as a board receives it
  /// With --power-mode auto: each mode tried, and the one chosen (the outcome's).
  struct ModeTried {
    std::string mode;
    std::optional<double> energy_j, time_s;  ///< the simulator's; none without a schedule
    std::string why;                         ///< why there is no schedule
    /// Not planned: one pass alone cost no less than the best plan already found (`why` says so).
    bool skipped = false;
  };
  std::vector<ModeTried> modes;
  std::string power_mode;
  /// With auto: the time limit the chosen mode was planned again with, where the modes not
  /// planned left well more than its share (0 when it was not); the cheaper plan stands.
  double again_s = 0;
  /// Per-phase modes: the two switches an iteration takes (the board idling meanwhile),
  /// beyond what the simulator's replay counts; the deadline the planner saw was shortened
  /// by their time.
  double switch_time_s = 0;
  double switch_energy_j = 0;
  /// With auto, why per-phase pairs were not tried (empty when they were, or with one mode).
  std::string per_phase_note;
};

/// What a long plan reports while it runs: each mode as --power-mode auto starts planning
/// it (name, its number, how many), and the solver's incumbent and bound.
struct PlanProgress {
  std::function<void(const std::string& mode, std::size_t n, std::size_t total)> on_mode;
  /// The mode chosen planned again with the time the modes not planned left (seconds).
  std::function<void(const std::string& mode, double time_limit_s)> on_mode_again;
  std::function<void(const planner::SolveProgress&)> on_solve;
};

/// Builds the graph, solves, and replays the schedule in the simulator, reporting to
/// `progress`. With power_mode "auto",
/// plans in every mode (the modes measured in args.db, else the board profile's), with the
/// deadline in seconds of the board's default mode, and keeps the least energy; InputError
/// listing each mode's reason when none has a schedule.
PlanOutcome plan(const PlanArgs& args, const PlanProgress& progress = {});

}  // namespace ergon::app
