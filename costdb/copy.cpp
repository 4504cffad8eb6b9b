// ergon copy: one cost database merged into another, on either engine.

#include "costdb/copy.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "costdb/cost_model.h"
#include "costdb/costs.h"
#include "costdb/database_impl.h"
#include "costdb/plans.h"

namespace ergon::costdb {
namespace {

/// A run of the source database, as stored (its status as stored, never "interrupted").
struct SourceRun {
  int64_t id = 0;
  BoardInfo board;
  std::string source;
  int64_t started_at_ns = 0;
  std::optional<int64_t> ended_at_ns;
  std::string status;
  LinkCounters counters;
  std::optional<int64_t> power_run_id;
  std::string mode_params_json;
  std::optional<std::string> plan;
  std::string link;
};

std::optional<uint64_t> opt_uint(const detail::Statement& q, int col) {
  if (q.column_is_null(col)) return std::nullopt;
  return q.column_uint64(col);
}

std::vector<SourceRun> read_runs(Database::Impl& db) {
  detail::Statement q(
      db,
      "SELECT r.id, b.kind, b.name, b.firmware_version, b.tick_hz, b.ram_bytes, r.source, "
      "r.started_at_ns, r.ended_at_ns, r.status, r.bytes, r.frames_ok, r.frames_lost, r.crc_errors, "
      "r.malformed, r.device_spans_sent, r.device_samples_sent, r.device_frames_sent, r.power_run_id, "
      "m.name, m.params_json, r.device_time_scale, r.plan, r.link "
      "FROM runs r JOIN boards b ON b.id = r.board_id "
      "LEFT JOIN power_modes m ON m.id = r.power_mode_id ORDER BY r.id");
  std::vector<SourceRun> runs;
  while (q.step("cannot read the runs to copy")) {
    SourceRun r;
    r.id = q.column_int64(0);
    r.board.kind = q.column_text(1);
    r.board.name = q.column_text(2);
    r.board.firmware_version = static_cast<uint32_t>(q.column_int64(3));
    r.board.tick_hz = q.column_uint64(4);
    r.board.ram_bytes = q.column_uint64(5);
    r.source = q.column_text(6);
    r.started_at_ns = q.column_int64(7);
    if (!q.column_is_null(8)) r.ended_at_ns = q.column_int64(8);
    r.status = q.column_text(9);
    r.counters.bytes = q.column_uint64(10);
    r.counters.frames_ok = q.column_uint64(11);
    r.counters.frames_lost = q.column_uint64(12);
    r.counters.crc_errors = q.column_uint64(13);
    r.counters.malformed = q.column_uint64(14);
    r.counters.device_spans_sent = opt_uint(q, 15);
    r.counters.device_samples_sent = opt_uint(q, 16);
    r.counters.device_frames_sent = opt_uint(q, 17);
    if (!q.column_is_null(18)) r.power_run_id = q.column_int64(18);
    if (!q.column_is_null(19)) r.board.power_mode = q.column_text(19);
    r.mode_params_json = q.column_text(20);
    r.board.time_scale = q.column_double(21);
    if (!q.column_is_null(22)) r.plan = std::string(q.column_text(22));
    r.link = q.column_text(23);
    runs.push_back(std::move(r));
  }
  return runs;
}

std::optional<int64_t> present_run(Database::Impl& to, const SourceRun& run) {
  detail::Statement q(to,
                      "SELECT r.id FROM runs r JOIN boards b ON b.id = r.board_id WHERE b.kind = ?1 "
                      "AND b.name = ?2 AND r.started_at_ns = ?3 AND r.source = ?4 ORDER BY r.id LIMIT 1");
  q.bind(1, std::string_view(run.board.kind));
  q.bind(2, std::string_view(run.board.name));
  q.bind(3, run.started_at_ns);
  q.bind(4, std::string_view(run.source));
  std::optional<int64_t> id;
  if (q.step("cannot look for run " + std::to_string(run.id))) id = q.column_int64(0);
  q.reset();
  return id;
}

/// The run's ops with their shapes, each shape found or added in the target.
void copy_ops(Database::Impl& from, Database::Impl& to, int64_t from_run, int64_t to_run,
              const std::string& doing) {
  detail::Statement ops(from,
                        "SELECT o.op_id, o.phase, s.kind, s.dims, s.flops, s.bytes_in, s.bytes_out, o.copies "
                        "FROM run_ops o JOIN op_shapes s ON s.id = o.shape_id WHERE o.run_id = ?1 "
                        "ORDER BY o.op_id");
  ops.bind(1, from_run);
  detail::Statement add_shape(to,
                              "INSERT INTO op_shapes (kind, dims, flops, bytes_in, bytes_out) "
                              "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING");
  detail::Statement find_shape(to,
                               "SELECT id FROM op_shapes WHERE kind = ?1 AND dims = ?2 AND flops = ?3 "
                               "AND bytes_in = ?4 AND bytes_out = ?5");
  detail::Statement add_op(to, "INSERT INTO run_ops (run_id, op_id, shape_id, phase, copies) VALUES (?1, ?2, ?3, ?4, ?5)");
  while (ops.step(doing)) {
    const std::string kind(ops.column_text(2));
    const std::string dims(ops.column_text(3));
    for (detail::Statement* s : {&add_shape, &find_shape}) {
      s->bind(1, std::string_view(kind));
      s->bind(2, std::string_view(dims));
      s->bind(3, ops.column_int64(4));
      s->bind(4, ops.column_int64(5));
      s->bind(5, ops.column_int64(6));
    }
    add_shape.run(doing);
    if (!find_shape.step(doing)) throw DatabaseError(to.message(doing, "a shape it added is not there"));
    const int64_t shape_id = find_shape.column_int64(0);
    find_shape.reset();
    const std::string phase(ops.column_text(1));
    add_op.bind(1, to_run);
    add_op.bind(2, ops.column_int64(0));
    add_op.bind(3, shape_id);
    add_op.bind(4, std::string_view(phase));
    add_op.bind(5, ops.column_int64(7));
    add_op.run(doing);
  }
}

/// Spans, samples, sync points and events in the order they arrived, through the target's
/// own ingest path (COPY on PostgreSQL). Returns (spans, samples).
std::pair<uint64_t, uint64_t> copy_raw(Database::Impl& from, int64_t from_run, RunWriter& writer,
                                       const std::string& doing) {
  uint64_t span_count = 0;
  uint64_t sample_count = 0;
  {
    detail::Statement q(from,
                        "SELECT op_id, phase, begin_ticks, end_ticks, repetitions FROM op_spans "
                        "WHERE run_id = ?1 ORDER BY rowid");
    q.bind(1, from_run);
    while (q.step(doing)) {
      const auto phase = profiler::phase_from_name(q.column_text(1));
      if (!phase)
        throw DatabaseError(from.message(doing, "a span has phase '" + std::string(q.column_text(1)) +
                                                    "', which this ergon does not know"));
      writer.add_span({static_cast<uint32_t>(q.column_int64(0)), *phase, q.column_uint64(2),
                       q.column_uint64(3), static_cast<uint32_t>(q.column_int64(4))});
      ++span_count;
    }
  }
  {
    constexpr std::size_t kChunk = 1 << 16;
    detail::Statement q(from, std::string("SELECT ") + detail::kSampleColumns +
                                  " FROM power_samples WHERE run_id = ?1 ORDER BY rowid");
    q.bind(1, from_run);
    std::vector<probes::PowerSample> chunk;
    chunk.reserve(kChunk);
    while (q.step(doing)) {
      chunk.push_back(q.column_sample());
      if (chunk.size() == kChunk) {
        writer.add_samples(chunk);
        sample_count += chunk.size();
        chunk.clear();
      }
    }
    writer.add_samples(chunk);
    sample_count += chunk.size();
  }
  {
    detail::Statement q(from,
                        "SELECT sync_id, host_tx_ns, device_rx_ticks, device_tx_ticks, host_rx_ns "
                        "FROM sync_points WHERE run_id = ?1 ORDER BY rowid");
    q.bind(1, from_run);
    while (q.step(doing))
      writer.add_sync({static_cast<uint32_t>(q.column_int64(0)), q.column_int64(1), q.column_uint64(2),
                       q.column_uint64(3), q.column_int64(4)});
  }
  {
    detail::Statement q(from, "SELECT host_ns, kind, text FROM run_events WHERE run_id = ?1 ORDER BY rowid");
    q.bind(1, from_run);
    while (q.step(doing)) writer.add_event(q.column_int64(0), q.column_text(1), q.column_text(2));
  }
  return {span_count, sample_count};
}

/// What the run says it is, as stored; recording stays recording (with no end).
RunStatus stored_status(const SourceRun& run, const Database::Impl& from) {
  const auto status = detail::run_status_from_string(run.status);
  if (!status)
    throw DatabaseError(from.message("cannot copy run " + std::to_string(run.id),
                                     "its status '" + run.status + "' is unknown"));
  return *status;
}

std::optional<int64_t> present_plan(Database::Impl& to, const PlanRow& plan) {
  const bool no_deadline = !plan.deadline_s;
  detail::Statement q(to, std::string("SELECT p.id FROM plans p JOIN boards b ON b.id = p.board_id "
                                      "WHERE b.kind = ?1 AND p.graph_digest = ?2 AND p.planner = ?3 "
                                      "AND p.objective = ?4 AND p.budget_bytes = ?5 AND p.power_mode = ?6 "
                                      "AND p.cost_source = ?7 AND p.created_at_ns = ?8 AND ") +
                              (no_deadline ? "p.deadline_s IS NULL" : "p.deadline_s = ?9") +
                              " ORDER BY p.id LIMIT 1");
  q.bind(1, std::string_view(plan.board_kind));
  q.bind(2, std::string_view(plan.graph_digest));
  q.bind(3, std::string_view(plan.planner));
  q.bind(4, std::string_view(plan.objective));
  q.bind(5, plan.budget_bytes);
  q.bind(6, std::string_view(plan.power_mode));
  q.bind(7, to_string(plan.cost_source));
  q.bind(8, plan.created_at_ns);
  if (!no_deadline) q.bind(9, *plan.deadline_s);
  std::optional<int64_t> id;
  if (q.step("cannot look for plan " + std::to_string(plan.id))) id = q.column_int64(0);
  q.reset();
  return id;
}

bool present_validation(Database::Impl& to, int64_t plan_id, int64_t run_id) {
  detail::Statement q(to, "SELECT 1 FROM validations WHERE plan_id = ?1 AND run_id = ?2");
  q.bind(1, plan_id);
  q.bind(2, run_id);
  const bool found = q.step("cannot look for a validation");
  q.reset();
  return found;
}

}  // namespace

CopyCounts copy_database(Database& from_db, Database& to_db,
                         const std::function<void(const CopyProgress&)>& progress) {
  Database::Impl& from = from_db.impl();
  Database::Impl& to = to_db.impl();
  if (to.read_only) throw DatabaseError("database " + to.path.string() + " is open read-only");
  CopyCounts counts;
  std::map<int64_t, int64_t> run_ids;  // source id -> target id
  std::vector<std::pair<int64_t, int64_t>> power_links;  // (target run, source logger run)
  std::set<std::string> kinds_copied;

  const std::vector<SourceRun> runs = read_runs(from);
  int index = 0;
  for (const SourceRun& run : runs) {
    ++index;
    const std::string doing = "cannot copy run " + std::to_string(run.id);
    CopyProgress step{.run_index = index, .run_count = static_cast<int>(runs.size()), .source_run_id = run.id};
    if (const auto present = present_run(to, run)) {
      run_ids[run.id] = *present;
      ++counts.runs_present;
      step.present = true;
      if (progress) progress(step);
      continue;
    }
    const RunStatus status = stored_status(run, from);
    BoardInfo board = run.board;
    board.rails = list_rails(from_db, run.id);
    const auto plan = run.plan ? detail::run_plan_from_string(*run.plan) : std::nullopt;
    int64_t to_run = 0;
    {
      RunWriter writer(to_db, board, run.source, run.started_at_ns, plan.value_or(RunPlan::kProfile), run.link);
      to_run = writer.run_id();
      copy_ops(from, to, run.id, to_run, doing);
      const auto [spans, samples] = copy_raw(from, run.id, writer, doing);
      counts.spans += spans;
      counts.samples += samples;
      step.samples = samples;
      writer.update(status, run.counters, run.ended_at_ns.value_or(0));
    }
    if (!run.plan) {  // recorded before runs said what they ran: it stays unsaid
      detail::Statement unsaid(to, "UPDATE runs SET plan = NULL WHERE id = ?1");
      unsaid.bind(1, to_run);
      unsaid.run(doing);
    }
    if (!board.power_mode.empty() && run.mode_params_json != "{}" && !run.mode_params_json.empty()) {
      detail::Statement params(to,
                               "UPDATE power_modes SET params_json = ?2 WHERE params_json = '{}' AND "
                               "id = (SELECT power_mode_id FROM runs WHERE id = ?1)");
      params.bind(1, to_run);
      params.bind(2, std::string_view(run.mode_params_json));
      params.run(doing);
    }
    if (const auto attribution = find_attribution(from_db, run.id)) {
      const auto costs = list_op_costs(from_db, std::nullopt, run.id);
      replace_attribution(to_db, to_run, *attribution, costs);
    }
    run_ids[run.id] = to_run;
    if (run.power_run_id) power_links.emplace_back(to_run, *run.power_run_id);
    kinds_copied.insert(run.board.kind);
    ++counts.runs_copied;
    to_db.commit_batch();  // each run whole or not at all: an interrupted copy resumes
    if (progress) progress(step);
  }
  for (const auto& [to_run, from_logger] : power_links) {
    const auto logger = run_ids.find(from_logger);
    if (logger != run_ids.end()) set_power_run(to_db, to_run, logger->second);
  }
  for (const std::string& kind : kinds_copied) {
    rebuild_paging_costs(to_db, kind);
    rebuild_link_costs(to_db, kind);
  }
  to_db.commit_batch();

  std::map<int64_t, int64_t> plan_ids;
  for (PlanRow plan : list_plans(from_db)) {
    const int64_t from_id = plan.id;
    if (const auto present = present_plan(to, plan)) {
      plan_ids[from_id] = *present;
      ++counts.plans_present;
      continue;
    }
    plan_ids[from_id] = add_plan(to_db, plan);
    ++counts.plans_copied;
  }
  for (const ValidationRow& v : list_validations(from_db)) {
    const auto plan = plan_ids.find(v.plan_id);
    const auto run = run_ids.find(v.run_id);
    if (plan == plan_ids.end() || run == run_ids.end()) continue;
    if (present_validation(to, plan->second, run->second)) continue;
    ValidationRow copy = v;
    copy.plan_id = plan->second;
    copy.run_id = run->second;
    add_validation(to_db, copy);
    ++counts.validations_copied;
  }
  to_db.commit_batch();
  return counts;
}

}  // namespace ergon::costdb
