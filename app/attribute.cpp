#include "app/attribute.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "costdb/cost_model.h"
#include "devices/host/record_session.h"

namespace ergon::app {

namespace {

bool is_logger_run(const costdb::RunSummary& run) {
  return run.board_kind == devices::kPowerLoggerKindName;
}

}  // namespace

AttributedRun attribution_of(costdb::Database& db, int64_t run_id) {
  const costdb::RunData data = costdb::load_run_data(db, run_id);
  if (is_logger_run(data.run))
    throw InputError("run " + std::to_string(run_id) +
                     " is a power logger's: attribute the run of the board it measured");
  AttributedRun r;
  r.run = data.run;
  if (data.run.power_run_id) {
    // Measured by a power logger on its own clock: its samples reach the board's clock
    // through host time, each device's clock fitted from its own sync exchanges.
    const costdb::RunData logger = costdb::load_run_data(db, *data.run.power_run_id);
    r.logger_clock = profiler::fit_clock(logger.syncs, logger.tick_hz, profiler::kMaxPlausibleDriftPpm, logger.time_scale);
    constexpr double kAnyDrift = std::numeric_limits<double>::infinity();
    const auto logger_fit = profiler::fit_clock(logger.syncs, logger.tick_hz, kAnyDrift);
    const auto board_fit = profiler::fit_clock(data.syncs, data.tick_hz, kAnyDrift);
    auto samples = profiler::to_board_ticks(logger.samples, logger_fit, board_fit);
    // Op markers: where the logger saw the board's window pin rise (a PPK2's D0), those edges
    // map the logger's clock straight onto the board's.
    std::vector<uint64_t> rising;
    uint8_t previous = 0;
    for (const auto& e : costdb::list_events(db, *data.run.power_run_id)) {
      if (e.kind != "marker") continue;
      const auto logic = static_cast<uint8_t>(std::strtoul(e.text.c_str(), nullptr, 0));
      if ((logic & 1) != 0 && (previous & 1) == 0) rising.push_back(static_cast<uint64_t>(e.host_ns));
      previous = logic;
    }
    if (const auto markers = profiler::fit_markers(rising, data.spans, logger_fit, board_fit, data.tick_hz)) {
      for (std::size_t i = 0; i < samples.size(); ++i) samples[i].t_ticks = markers->board_ticks(logger.samples[i].t_ticks);
      r.markers = markers;
    }
    r.attribution = profiler::attribute(data.spans, samples, data.syncs, data.tick_hz, 0, data.time_scale);
    r.samples = samples.size();
  } else {
    r.attribution = profiler::attribute(data.spans, data.samples, data.syncs, data.tick_hz, 0, data.time_scale);
    r.samples = data.samples.size();
  }
  for (const profiler::OpCost& c : r.attribution.ops) {
    costdb::OpCostRow row;
    row.run_id = run_id;
    row.op_id = c.op_id;
    row.phase = c.phase;
    row.time_s = c.time_s;
    if (c.windows > 1) row.time_s_stddev = c.time_s_stddev;
    if (c.energy_known()) {
      row.gross_energy_j = c.gross_energy_j;
      row.net_energy_j = c.net_energy_j;
      row.energy_j_stddev = c.energy_j_stddev;
    }
    row.sample_count = c.sample_count;
    r.rows.push_back(row);
  }
  return r;
}

AttributedRun attribute_run(costdb::Database& db, int64_t run_id) {
  AttributedRun r = attribution_of(db, run_id);
  const auto& a = r.attribution;
  costdb::RunAttributionRow summary{
      .clock_fitted = a.clock.fitted,
      .clock_drift_ppm = a.clock.drift_ppm,
      .clock_residual_rms_ns = a.clock.residual_rms_ns,
      .clock_residual_max_ns = a.clock.residual_max_ns,
      .clock_points_used = a.clock.points_used,
      .clock_points_total = a.clock.points_total,
      .clock_note = a.clock.note,
      .sample_period_s = a.sample_period_s,
      .idle_power_w = a.idle_power_w,
      .idle_power_sigma_w = a.idle_power_sigma_w,
      .idle_samples = a.idle_samples,
      .samples_flagged = a.samples_flagged,
      .windows = static_cast<uint32_t>(a.windows.size()),
      .windows_uncovered = static_cast<uint32_t>(std::count_if(
          a.windows.begin(), a.windows.end(), [](const auto& w) { return !w.covered; })),
  };
  costdb::replace_attribution(db, run_id, summary, r.rows);
  r.paging_rows = costdb::rebuild_paging_costs(db, r.run.board_kind);
  r.link_rows = costdb::rebuild_link_costs(db, r.run.board_kind);
  db.commit_batch();  // op costs, run summary and paging costs land together
  return r;
}

std::vector<int64_t> attributable_runs(costdb::Database& db) {
  std::vector<int64_t> ids;
  for (const auto& r : costdb::list_runs(db))
    if (!is_logger_run(r)) ids.push_back(r.id);
  return ids;
}

}  // namespace ergon::app
