#include "costdb/costs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/error.h"
#include "costdb/database_impl.h"

namespace ergon::costdb {

RunData load_run_data(Database& database, int64_t run_id) {
  auto run = find_run(database, run_id);
  if (!run) throw InputError("no run " + std::to_string(run_id) + " in " + database.path().string());
  auto& db = database.impl();
  const std::string doing = "cannot read run " + std::to_string(run_id);
  RunData d;
  d.run = std::move(*run);
  {
    detail::Statement q(db,
                        "SELECT b.tick_hz, r.device_time_scale FROM runs r JOIN boards b ON b.id = r.board_id "
                        "WHERE r.id = ?1");
    q.bind(1, run_id);
    if (q.step(doing)) {
      d.tick_hz = q.column_uint64(0);
      d.time_scale = q.column_double(1);
    }
    q.reset();
  }
  {
    detail::Statement q(db,
                        "SELECT op_id, phase, begin_ticks, end_ticks, repetitions FROM op_spans "
                        "WHERE run_id = ?1 ORDER BY begin_ticks, rowid");
    q.bind(1, run_id);
    while (q.step(doing)) {
      profiler::OpSpan s;
      s.op_id = static_cast<uint32_t>(q.column_int64(0));
      const auto phase = profiler::phase_from_name(q.column_text(1));
      if (!phase) continue;  // a phase this build does not know: not attributable
      s.phase = *phase;
      s.begin_ticks = q.column_uint64(2);
      s.end_ticks = q.column_uint64(3);
      s.repetitions = static_cast<uint32_t>(q.column_int64(4));
      d.spans.push_back(s);
    }
  }
  {
    detail::Statement q(db, std::string("SELECT ") + detail::kSampleColumns +
                                " FROM power_samples WHERE run_id = ?1");
    q.bind(1, run_id);
    while (q.step(doing)) d.samples.push_back(q.column_sample());
    std::stable_sort(d.samples.begin(), d.samples.end(),
                     [](const auto& a, const auto& b) { return a.t_ticks < b.t_ticks; });
  }
  {
    detail::Statement q(db,
                        "SELECT sync_id, host_tx_ns, device_rx_ticks, device_tx_ticks, host_rx_ns "
                        "FROM sync_points WHERE run_id = ?1 ORDER BY rowid");
    q.bind(1, run_id);
    while (q.step(doing)) {
      SyncPoint p;
      p.sync_id = static_cast<uint32_t>(q.column_int64(0));
      p.host_tx_ns = q.column_int64(1);
      p.device_rx_ticks = q.column_uint64(2);
      p.device_tx_ticks = q.column_uint64(3);
      p.host_rx_ns = q.column_int64(4);
      d.syncs.push_back(p);
    }
  }
  return d;
}

void replace_attribution(Database& database, int64_t run_id, const RunAttributionRow& summary,
                         std::span<const OpCostRow> rows) {
  auto& db = database.impl();
  if (db.read_only) throw DatabaseError("database " + db.path.string() + " is open read-only");
  db.ensure_batch();
  const std::string doing = "cannot store the costs of run " + std::to_string(run_id);
  detail::Statement clear(db, "DELETE FROM op_costs WHERE run_id = ?1");
  clear.bind(1, run_id);
  clear.run(doing);
  detail::Statement run_row(
      db,
      "INSERT INTO run_attributions (run_id, clock_fitted, clock_drift_ppm, "
      "clock_residual_rms_ns, clock_residual_max_ns, clock_points_used, clock_points_total, "
      "clock_note, sample_period_s, idle_power_w, idle_power_sigma_w, idle_samples, "
      "samples_flagged, windows, windows_uncovered) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) "
      "ON CONFLICT (run_id) DO UPDATE SET clock_fitted = excluded.clock_fitted, "
      "clock_drift_ppm = excluded.clock_drift_ppm, "
      "clock_residual_rms_ns = excluded.clock_residual_rms_ns, "
      "clock_residual_max_ns = excluded.clock_residual_max_ns, "
      "clock_points_used = excluded.clock_points_used, "
      "clock_points_total = excluded.clock_points_total, clock_note = excluded.clock_note, "
      "sample_period_s = excluded.sample_period_s, idle_power_w = excluded.idle_power_w, "
      "idle_power_sigma_w = excluded.idle_power_sigma_w, idle_samples = excluded.idle_samples, "
      "samples_flagged = excluded.samples_flagged, windows = excluded.windows, "
      "windows_uncovered = excluded.windows_uncovered");
  run_row.bind(1, run_id);
  run_row.bind(2, int64_t{summary.clock_fitted ? 1 : 0});
  run_row.bind(3, summary.clock_drift_ppm);
  run_row.bind(4, summary.clock_residual_rms_ns);
  run_row.bind(5, summary.clock_residual_max_ns);
  run_row.bind(6, int64_t{summary.clock_points_used});
  run_row.bind(7, int64_t{summary.clock_points_total});
  run_row.bind(8, std::string_view(summary.clock_note));
  run_row.bind(9, summary.sample_period_s);
  run_row.bind(10, summary.idle_power_w);
  run_row.bind(11, summary.idle_power_sigma_w);
  run_row.bind(12, int64_t{summary.idle_samples});
  run_row.bind(13, int64_t{summary.samples_flagged});
  run_row.bind(14, int64_t{summary.windows});
  run_row.bind(15, int64_t{summary.windows_uncovered});
  run_row.run(doing);
  detail::Statement insert(
      db,
      "INSERT INTO op_costs (run_id, op_id, phase, time_s, time_s_stddev, gross_energy_j, "
      "net_energy_j, energy_j_stddev, sample_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  for (const OpCostRow& r : rows) {
    const std::string phase(profiler::to_string(r.phase));
    insert.bind(1, run_id);
    insert.bind(2, static_cast<int64_t>(r.op_id));
    insert.bind(3, std::string_view(phase));
    insert.bind(4, r.time_s);
    if (r.time_s_stddev && std::isfinite(*r.time_s_stddev)) insert.bind(5, *r.time_s_stddev);
    else insert.bind_null(5);
    if (r.gross_energy_j && r.net_energy_j) {
      insert.bind(6, *r.gross_energy_j);
      insert.bind(7, *r.net_energy_j);
    } else {
      insert.bind_null(6);
      insert.bind_null(7);
    }
    if (r.energy_j_stddev && std::isfinite(*r.energy_j_stddev)) insert.bind(8, *r.energy_j_stddev);
    else insert.bind_null(8);
    insert.bind(9, static_cast<int64_t>(r.sample_count));
    insert.run(doing);
  }
  
}

std::optional<RunAttributionRow> find_attribution(Database& database, int64_t run_id) {
  auto& db = database.impl();
  detail::Statement q(
      db,
      "SELECT clock_fitted, clock_drift_ppm, clock_residual_rms_ns, clock_residual_max_ns, "
      "clock_points_used, clock_points_total, clock_note, sample_period_s, idle_power_w, "
      "idle_power_sigma_w, idle_samples, samples_flagged, windows, windows_uncovered "
      "FROM run_attributions WHERE run_id = ?1");
  q.bind(1, run_id);
  if (!q.step("cannot read the attribution of run " + std::to_string(run_id))) return std::nullopt;
  RunAttributionRow r;
  r.clock_fitted = q.column_int64(0) != 0;
  r.clock_drift_ppm = q.column_double(1);
  r.clock_residual_rms_ns = q.column_double(2);
  r.clock_residual_max_ns = q.column_double(3);
  r.clock_points_used = static_cast<int>(q.column_int64(4));
  r.clock_points_total = static_cast<int>(q.column_int64(5));
  r.clock_note = q.column_text(6);
  r.sample_period_s = q.column_double(7);
  r.idle_power_w = q.column_double(8);
  r.idle_power_sigma_w = q.column_double(9);
  r.idle_samples = static_cast<uint32_t>(q.column_int64(10));
  r.samples_flagged = static_cast<uint32_t>(q.column_int64(11));
  r.windows = static_cast<uint32_t>(q.column_int64(12));
  r.windows_uncovered = static_cast<uint32_t>(q.column_int64(13));
  q.reset();
  return r;
}

std::vector<OpCostRow> list_op_costs(Database& database, const std::optional<std::string>& board_kind,
                                     std::optional<int64_t> run_id,
                                     const std::optional<std::string>& power_mode) {
  auto& db = database.impl();
  detail::Statement q(
      db,
      "SELECT c.run_id, c.op_id, c.phase, c.time_s, c.time_s_stddev, c.gross_energy_j, "
      "c.net_energy_j, c.energy_j_stddev, c.sample_count, b.kind, b.name, s.kind, s.dims, "
      "s.flops, s.bytes_in, s.bytes_out, m.name, r.plan, r.link, o.copies "
      "FROM op_costs c JOIN runs r ON r.id = c.run_id JOIN boards b ON b.id = r.board_id "
      "LEFT JOIN power_modes m ON m.id = r.power_mode_id "
      "LEFT JOIN run_ops o ON o.run_id = c.run_id AND o.op_id = c.op_id "
      "LEFT JOIN op_shapes s ON s.id = o.shape_id "
      // Typed where a parameter is first met (PostgreSQL cannot guess the type of a NULL).
      "WHERE (CAST(?1 AS TEXT) IS NULL OR b.kind = ?1) "
      "AND (CAST(?2 AS BIGINT) IS NULL OR c.run_id = ?2) "
      "AND (CAST(?3 AS TEXT) IS NULL OR m.name = ?3) "
      "ORDER BY b.kind, b.name, c.run_id, c.op_id, c.phase");
  if (board_kind) q.bind(1, std::string_view(*board_kind));
  else q.bind_null(1);
  if (run_id) q.bind(2, *run_id);
  else q.bind_null(2);
  if (power_mode) q.bind(3, std::string_view(*power_mode));
  else q.bind_null(3);
  std::vector<OpCostRow> rows;
  while (q.step("cannot read op costs")) {
    OpCostRow r;
    r.run_id = q.column_int64(0);
    r.op_id = static_cast<uint32_t>(q.column_int64(1));
    r.phase = profiler::phase_from_name(q.column_text(2)).value_or(profiler::Phase::kForward);
    r.time_s = q.column_double(3);
    if (!q.column_is_null(4)) r.time_s_stddev = q.column_double(4);
    if (!q.column_is_null(5)) r.gross_energy_j = q.column_double(5);
    if (!q.column_is_null(6)) r.net_energy_j = q.column_double(6);
    if (!q.column_is_null(7)) r.energy_j_stddev = q.column_double(7);
    r.sample_count = static_cast<uint32_t>(q.column_int64(8));
    r.board_kind = q.column_text(9);
    r.board_name = q.column_text(10);
    r.op_kind = q.column_text(11);
    r.dims = q.column_text(12);
    r.flops = q.column_uint64(13);
    r.bytes_in = q.column_uint64(14);
    r.bytes_out = q.column_uint64(15);
    if (!q.column_is_null(16)) r.power_mode = q.column_text(16);
    if (!q.column_is_null(17)) r.run_plan = detail::run_plan_from_string(q.column_text(17));
    if (!q.column_is_null(18)) r.link = q.column_text(18);
    if (!q.column_is_null(19)) r.copies = static_cast<uint16_t>(q.column_int64(19));
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<std::string> measured_power_modes(Database& db, const std::string& board_kind) {
  std::set<std::string> modes;
  for (const OpCostRow& r : list_op_costs(db, board_kind, std::nullopt))
    if (!r.power_mode.empty() && r.op_kind != "transfer") modes.insert(r.power_mode);
  return {modes.begin(), modes.end()};
}

std::vector<MeasuredBoard> measured_boards(Database& db) {
  std::map<std::string, bool> kinds;
  for (const OpCostRow& r : list_op_costs(db, std::nullopt, std::nullopt))
    if (r.op_kind != "transfer")  // a link test measures the link, not costs to plan on
      kinds[r.board_kind] = kinds[r.board_kind] || r.gross_energy_j.has_value();
  std::vector<MeasuredBoard> out;
  for (const auto& [kind, energy] : kinds) out.push_back({kind, energy});
  return out;
}

std::optional<double> measured_mode_switch_s(Database& database, const std::string& board_kind) {
  auto& db = database.impl();
  // The JSON functions are each engine's own.
  const char* switch_ns = db.postgres() ? "(m.params_json::jsonb ->> 'switch_ns')::bigint"
                                        : "json_extract(m.params_json, '$.switch_ns')";
  detail::Statement q(db, std::string("SELECT max(") + switch_ns + ") FROM power_modes m "
                      "JOIN boards b ON b.id = m.board_id WHERE b.kind = ?1");
  q.bind(1, std::string_view(board_kind));
  std::optional<double> out;
  if (q.step("cannot read the power modes of " + board_kind) && !q.column_is_null(0))
    out = static_cast<double>(q.column_int64(0)) * 1e-9;
  q.reset();
  return out;
}

}  // namespace ergon::costdb
