#pragma once

// Energy attribution's inputs and outputs in the cost database: a run's raw data in, the
// derived op_costs table out (always rebuilt whole from the raw tables).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "costdb/database.h"

namespace ergon::costdb {

/// One run's raw tables, as recorded.
struct RunData {
  RunSummary run;
  uint64_t tick_hz = 0;
  double time_scale = 1;  ///< board seconds per real second (runs.device_time_scale)
  std::vector<profiler::OpSpan> spans;            ///< by begin time
  std::vector<probes::PowerSample> samples;       ///< by time
  std::vector<SyncPoint> syncs;
};

/// Throws InputError for a run that does not exist.
RunData load_run_data(Database& db, int64_t run_id);

/// A row of op_costs with what it was measured on.
struct OpCostRow {
  int64_t run_id = 0;
  uint32_t op_id = 0;
  profiler::Phase phase = profiler::Phase::kForward;
  double time_s = 0;                     ///< per repetition
  std::optional<double> time_s_stddev;
  /// Both or neither: none when no power samples covered the op (a time cost only).
  std::optional<double> gross_energy_j;
  std::optional<double> net_energy_j;
  std::optional<double> energy_j_stddev;  ///< 1 sigma
  uint32_t sample_count = 0;
  // Read back with the row (ignored when writing):
  std::string board_kind;
  std::string board_name;
  std::string power_mode;  ///< the run's; empty when the board did not say
  std::optional<RunPlan> run_plan;  ///< the run's; none before schema version 9
  std::string link;  ///< the link kind a link test ran over; empty for other runs
  std::string op_kind;  ///< conv2d, linear, ... (empty when the op is not declared)
  std::string dims;
  uint64_t flops = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  /// Copies of the op's tensors the board cycled through (run_ops.copies, protocol v8): 0,
  /// read from memory each run (the costs planners use); 1, warm; k, at a reuse distance of
  /// k - 1 copies.
  uint16_t copies = 0;
};

/// What attributing a run found besides its op costs (the run_attributions table).
struct RunAttributionRow {
  bool clock_fitted = false;
  double clock_drift_ppm = 0;
  double clock_residual_rms_ns = 0;
  double clock_residual_max_ns = 0;
  int clock_points_used = 0;
  int clock_points_total = 0;
  std::string clock_note;
  double sample_period_s = 0;
  double idle_power_w = 0;
  double idle_power_sigma_w = 0;
  uint32_t idle_samples = 0;
  uint32_t samples_flagged = 0;
  uint32_t windows = 0;
  uint32_t windows_uncovered = 0;
};

/// Replaces the run's rows of op_costs with `rows`, and its run_attributions row with
/// `summary`, in the current batch (commit it to make them durable): re-attributing a run
/// gives the same tables, never duplicates.
void replace_attribution(Database& db, int64_t run_id, const RunAttributionRow& summary,
                         std::span<const OpCostRow> rows);

/// The run's run_attributions row; nullopt when it was never attributed.
std::optional<RunAttributionRow> find_attribution(Database& db, int64_t run_id);

/// The power modes a board kind's attributed costs were measured in (empty names left out).
std::vector<std::string> measured_power_modes(Database& db, const std::string& board_kind);

/// A board kind with attributed costs, and whether any of them carries energy (none: it was
/// recorded without a power probe).
struct MeasuredBoard {
  std::string kind;
  bool has_energy = false;
};
/// Every board kind with attributed costs, by kind.
std::vector<MeasuredBoard> measured_boards(Database& db);

/// The longest a board kind took to switch into any of its modes, as measured when the host
/// switched them (ergon sweep, ergon record --power-mode); nullopt when never measured.
std::optional<double> measured_mode_switch_s(Database& db, const std::string& board_kind);

/// op_costs rows with their board, power mode and op shape, by board, run, op id and phase;
/// optionally only one board kind, one run, or the runs in one power mode.
std::vector<OpCostRow> list_op_costs(Database& db, const std::optional<std::string>& board_kind,
                                     std::optional<int64_t> run_id,
                                     const std::optional<std::string>& power_mode = std::nullopt);

}  // namespace ergon::costdb
