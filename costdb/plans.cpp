// The plans table: what planners answered, for Pareto fronts and resumable sweeps.

#include "costdb/plans.h"

#include <cmath>

#include "common/error.h"
#include "costdb/database_impl.h"

namespace ergon::costdb {
namespace {

constexpr const char* kColumns =
    "p.id, p.model, b.kind, p.cost_source, p.graph_digest, p.budget_bytes, p.deadline_s, p.planner, "
    "p.objective, p.status, p.objective_j, p.bound_j, p.gap, p.energy_j, p.time_s, "
    "p.paging_time_s, p.peak_bytes, p.solve_time_s, p.schedule, p.created_at_ns, p.power_mode, p.costs_timed_in";

std::optional<double> opt_double(const detail::Statement& row, int col) {
  if (row.column_is_null(col)) return std::nullopt;
  return row.column_double(col);
}

PlanRow read_plan(const detail::Statement& row) {
  PlanRow p;
  p.id = row.column_int64(0);
  p.model = row.column_text(1);
  p.board_kind = row.column_text(2);
  p.cost_source = row.column_text(3) == "measured" ? PlanCostSource::kMeasured : PlanCostSource::kProfile;
  p.graph_digest = row.column_text(4);
  p.budget_bytes = row.column_uint64(5);
  p.deadline_s = opt_double(row, 6);
  p.planner = row.column_text(7);
  p.objective = row.column_text(8);
  p.status = row.column_text(9);
  p.objective_j = opt_double(row, 10);
  p.bound_j = opt_double(row, 11);
  p.gap = opt_double(row, 12);
  p.energy_j = opt_double(row, 13);
  p.time_s = opt_double(row, 14);
  p.paging_time_s = opt_double(row, 15);
  if (!row.column_is_null(16)) p.peak_bytes = row.column_uint64(16);
  p.solve_time_s = row.column_double(17);
  p.schedule = row.column_blob(18);
  p.created_at_ns = row.column_int64(19);
  p.power_mode = row.column_text(20);
  p.costs_from_iterations = row.column_text(21) == "iteration";
  return p;
}

void bind_opt(detail::Statement& stmt, int index, std::optional<double> v) {
  // SQLite stores no infinities or NaNs usefully; an unbounded value is no value.
  if (v && std::isfinite(*v)) {
    stmt.bind(index, *v);
  } else {
    stmt.bind_null(index);
  }
}

void bind_opt(detail::Statement& stmt, int index, std::optional<uint64_t> v) {
  if (v) {
    stmt.bind(index, *v);
  } else {
    stmt.bind_null(index);
  }
}

/// The encoded schedule; NULL without one.
void bind_schedule(detail::Statement& stmt, int index, const std::vector<uint8_t>& schedule) {
  if (schedule.empty()) {
    stmt.bind_null(index);
  } else {
    stmt.bind_blob(index, schedule.data(), schedule.size());
  }
}

}  // namespace

std::string_view to_string(PlanCostSource source) {
  return source == PlanCostSource::kMeasured ? "measured" : "profile";
}

int64_t add_plan(Database& database, const PlanRow& plan) {
  auto& db = database.impl();
  if (db.read_only) throw DatabaseError("database " + db.path.string() + " is open read-only");
  db.ensure_batch();
  const std::string doing = "cannot store a plan";
  detail::Statement board(db,
                          "INSERT INTO boards (kind, name, tick_hz, ram_bytes, first_seen_ns) "
                          "VALUES (?1, ?2, 0, 0, ?3) "
                          "ON CONFLICT (kind, name) DO UPDATE SET kind = excluded.kind "
                          "RETURNING id");
  board.bind(1, std::string_view(plan.board_kind));
  board.bind(2, std::string_view(""));  // the board kind's row: a plan is of a kind, not of one board
  board.bind(3, plan.created_at_ns);
  if (!board.step(doing)) throw DatabaseError("database " + db.path.string() + ": " + doing);
  const int64_t board_id = board.column_int64(0);
  board.run(doing);

  detail::Statement insert(
      db,
      "INSERT INTO plans (model, board_id, budget_bytes, deadline_s, planner, status, "
      "objective_j, bound_j, solve_time_s, schedule, created_at_ns, objective, graph_digest, "
      "gap, energy_j, time_s, paging_time_s, peak_bytes, power_mode, cost_source, costs_timed_in) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21) "
      "RETURNING id");
  insert.bind(1, std::string_view(plan.model));
  insert.bind(2, board_id);
  insert.bind(3, plan.budget_bytes);
  bind_opt(insert, 4, plan.deadline_s);
  insert.bind(5, std::string_view(plan.planner));
  insert.bind(6, std::string_view(plan.status));
  bind_opt(insert, 7, plan.objective_j);
  bind_opt(insert, 8, plan.bound_j);
  insert.bind(9, plan.solve_time_s);
  bind_schedule(insert, 10, plan.schedule);
  insert.bind(11, plan.created_at_ns);
  insert.bind(12, std::string_view(plan.objective));
  insert.bind(13, std::string_view(plan.graph_digest));
  bind_opt(insert, 14, plan.gap);
  bind_opt(insert, 15, plan.energy_j);
  bind_opt(insert, 16, plan.time_s);
  bind_opt(insert, 17, plan.paging_time_s);
  bind_opt(insert, 18, plan.peak_bytes);
  insert.bind(19, std::string_view(plan.power_mode));
  insert.bind(20, to_string(plan.cost_source));
  insert.bind(21, std::string_view(plan.costs_from_iterations ? "iteration" : "profile"));
  if (!insert.step(doing)) throw DatabaseError("database " + db.path.string() + ": " + doing);
  const int64_t id = insert.column_int64(0);
  insert.run(doing);
  return id;
}

void update_plan_answer(Database& database, const PlanRow& plan) {
  auto& db = database.impl();
  if (db.read_only) throw DatabaseError("database " + db.path.string() + " is open read-only");
  db.ensure_batch();
  const std::string doing = "cannot update plan " + std::to_string(plan.id);
  detail::Statement update(db,
                           "UPDATE plans SET status = ?2, objective_j = ?3, bound_j = ?4, gap = ?5, "
                           "energy_j = ?6, time_s = ?7, paging_time_s = ?8, peak_bytes = ?9, schedule = ?10 "
                           "WHERE id = ?1");
  update.bind(1, plan.id);
  update.bind(2, std::string_view(plan.status));
  bind_opt(update, 3, plan.objective_j);
  bind_opt(update, 4, plan.bound_j);
  bind_opt(update, 5, plan.gap);
  bind_opt(update, 6, plan.energy_j);
  bind_opt(update, 7, plan.time_s);
  bind_opt(update, 8, plan.paging_time_s);
  bind_opt(update, 9, plan.peak_bytes);
  bind_schedule(update, 10, plan.schedule);
  update.run(doing);
  if (update.changes() != 1) throw DatabaseError("database " + db.path.string() + ": " + doing + ": no such plan");
}

int64_t add_validation(Database& database, const ValidationRow& v) {
  auto& db = database.impl();
  if (db.read_only) throw DatabaseError("database " + db.path.string() + " is open read-only");
  db.ensure_batch();
  detail::Statement insert(
      db,
      "INSERT INTO validations (plan_id, run_id, predicted_energy_j, measured_energy_j, "
      "predicted_time_s, measured_time_s, predicted_peak_bytes, measured_peak_bytes) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id");
  insert.bind(1, v.plan_id);
  insert.bind(2, v.run_id);
  bind_opt(insert, 3, v.predicted_energy_j);
  bind_opt(insert, 4, v.measured_energy_j);
  bind_opt(insert, 5, v.predicted_time_s);
  bind_opt(insert, 6, v.measured_time_s);
  if (v.predicted_peak_bytes) insert.bind(7, *v.predicted_peak_bytes);
  else insert.bind_null(7);
  if (v.measured_peak_bytes) insert.bind(8, *v.measured_peak_bytes);
  else insert.bind_null(8);
  const std::string doing = "cannot store a validation";
  if (!insert.step(doing)) throw DatabaseError("database " + db.path.string() + ": " + doing);
  const int64_t id = insert.column_int64(0);
  insert.run(doing);
  return id;
}

std::vector<ValidationRow> list_validations(Database& database) {
  auto& db = database.impl();
  detail::Statement q(db,
                      "SELECT plan_id, run_id, predicted_energy_j, measured_energy_j, predicted_time_s, "
                      "measured_time_s, predicted_peak_bytes, measured_peak_bytes FROM validations ORDER BY id");
  std::vector<ValidationRow> out;
  while (q.step("cannot read validations")) {
    ValidationRow v;
    v.plan_id = q.column_int64(0);
    v.run_id = q.column_int64(1);
    v.predicted_energy_j = opt_double(q, 2);
    v.measured_energy_j = opt_double(q, 3);
    v.predicted_time_s = opt_double(q, 4);
    v.measured_time_s = opt_double(q, 5);
    if (!q.column_is_null(6)) v.predicted_peak_bytes = static_cast<uint64_t>(q.column_int64(6));
    if (!q.column_is_null(7)) v.measured_peak_bytes = static_cast<uint64_t>(q.column_int64(7));
    out.push_back(v);
  }
  q.reset();
  return out;
}

std::vector<int64_t> runs_validating_planner(Database& database, const std::string& planner) {
  auto& db = database.impl();
  detail::Statement q(db,
                      "SELECT v.run_id FROM validations v JOIN plans p ON p.id = v.plan_id "
                      "WHERE p.planner = ?1 ORDER BY v.run_id");
  q.bind(1, std::string_view(planner));
  std::vector<int64_t> out;
  while (q.step("cannot read validations")) out.push_back(q.column_int64(0));
  q.reset();
  return out;
}

std::optional<PlanRow> find_plan(Database& database, const std::string& graph_digest,
                                 const std::string& planner, const std::string& objective,
                                 uint64_t budget_bytes, std::optional<double> deadline_s) {
  auto& db = database.impl();
  const bool no_deadline = !deadline_s || !std::isfinite(*deadline_s);
  detail::Statement q(db,
                      std::string("SELECT ") + kColumns +
                          " FROM plans p JOIN boards b ON b.id = p.board_id "
                          "WHERE p.graph_digest = ?1 AND p.planner = ?2 AND p.objective = ?3 "
                          "AND p.budget_bytes = ?4 AND " +
                          (no_deadline ? "p.deadline_s IS NULL" : "p.deadline_s = ?5") +
                          " ORDER BY p.id DESC LIMIT 1");
  q.bind(1, std::string_view(graph_digest));
  q.bind(2, std::string_view(planner));
  q.bind(3, std::string_view(objective));
  q.bind(4, budget_bytes);
  if (!no_deadline) q.bind(5, *deadline_s);
  const std::string doing = "cannot read plans";
  if (!q.step(doing)) return std::nullopt;
  PlanRow row = read_plan(q);
  q.reset();
  return row;
}

std::optional<PlanRow> find_plan_by_id(Database& database, int64_t plan_id) {
  auto& db = database.impl();
  detail::Statement q(db,
                      std::string("SELECT ") + kColumns +
                          " FROM plans p JOIN boards b ON b.id = p.board_id WHERE p.id = ?1");
  q.bind(1, plan_id);
  if (!q.step("cannot read plan " + std::to_string(plan_id))) return std::nullopt;
  PlanRow row = read_plan(q);
  q.reset();
  return row;
}

std::vector<PlanRow> list_plans(Database& database, const std::string& graph_digest) {
  auto& db = database.impl();
  detail::Statement q(db,
                      std::string("SELECT ") + kColumns +
                          " FROM plans p JOIN boards b ON b.id = p.board_id " +
                          (graph_digest.empty() ? "" : "WHERE p.graph_digest = ?1 ") +
                          "ORDER BY p.planner, p.budget_bytes, p.id");
  if (!graph_digest.empty()) q.bind(1, std::string_view(graph_digest));
  std::vector<PlanRow> rows;
  while (q.step("cannot read plans")) rows.push_back(read_plan(q));
  return rows;
}

}  // namespace ergon::costdb
