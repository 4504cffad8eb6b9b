#include "costdb/database.h"

#include <algorithm>
#include <array>
#include <string>

#include "common/error.h"
#include "costdb/database_impl.h"

namespace ergon::costdb {
namespace {

/// Samples per INSERT statement: one statement with many VALUES rows costs one VDBE run instead
/// of one per sample, which is most of the ingest speed. A span of n samples uses
/// floor(n / kMaxSampleRows) full statements and one statement sized for the rest.
constexpr std::size_t kMaxSampleRows = 64;
constexpr int kSampleParams = 6;  ///< per row; ?1 (run_id) is shared by every row

std::string sample_insert_sql(std::size_t rows) {
  std::string sql =
      "INSERT INTO power_samples (run_id, rail, t_ticks, bus_uv, current_ua, power_uw, flags) "
      "VALUES ";
  for (std::size_t i = 0; i < rows; ++i) {
    if (i != 0) sql += ',';
    sql += "(?1,?,?,?,?,?,?)";
  }
  return sql;
}

/// Steps a statement that returns one id (RETURNING or SELECT) and finishes it.
int64_t single_id(detail::Statement& stmt, const std::filesystem::path& path,
                  std::string_view doing) {
  if (!stmt.step(doing)) {
    throw DatabaseError("database " + path.string() + ": " + std::string(doing) +
                        ": no row id returned");
  }
  const int64_t id = stmt.column_int64(0);
  while (stmt.step(doing)) {
  }
  return id;
}

}  // namespace

struct RunWriter::Impl {
  Database::Impl* db = nullptr;  ///< not owned; heap-stable across moves of the Database
  int64_t run_id = 0;
  std::string doing_ops;
  std::string doing_spans;
  std::string doing_samples;
  std::string doing_sync;
  std::string doing_events;
  std::string doing_update;
  detail::Statement shape_insert;
  detail::Statement shape_select;
  detail::Statement run_op_insert;
  detail::Statement span_insert;
  detail::Statement sync_insert;
  detail::Statement event_insert;
  detail::Statement run_update;
  std::array<detail::Statement, kMaxSampleRows + 1> sample_inserts;  ///< index: rows
  // PostgreSQL: samples and spans go in by COPY; samples are numbered in arrival order.
  std::unique_ptr<detail::CopyBuffer> sample_copy;
  std::unique_ptr<detail::CopyBuffer> span_copy;
  int64_t next_sample_rowid = 0;

  detail::Statement& prepared(detail::Statement& stmt, std::string_view sql) {
    if (!stmt) stmt = detail::Statement(*db, sql);
    return stmt;
  }

  /// Prepares on first use; ?1 is bound to the run id once and stays bound across resets.
  detail::Statement& prepared_for_run(detail::Statement& stmt, std::string_view sql) {
    if (!stmt) {
      stmt = detail::Statement(*db, sql);
      stmt.bind(1, run_id);
    }
    return stmt;
  }

  sqlite3_stmt* sample_insert(std::size_t rows) {
    return prepared_for_run(sample_inserts[rows], sample_insert_sql(rows)).get();
  }
};

RunWriter::RunWriter(Database& database, const BoardInfo& board, std::string_view source,
                     int64_t started_at_ns, RunPlan plan, std::string_view link)
    : impl_(std::make_unique<Impl>()) {
  Database::Impl& db = database.impl();
  impl_->db = &db;
  db.ensure_batch();

  const std::string doing_board = "cannot record board " + board.kind + " " + board.name;
  detail::Statement board_upsert(
      db,
      "INSERT INTO boards (kind, name, firmware_version, tick_hz, ram_bytes, first_seen_ns) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
      "ON CONFLICT (kind, name) DO UPDATE SET firmware_version = excluded.firmware_version, "
      "tick_hz = excluded.tick_hz, ram_bytes = excluded.ram_bytes "
      "RETURNING id");
  board_upsert.bind(1, std::string_view(board.kind));
  board_upsert.bind(2, std::string_view(board.name));
  board_upsert.bind(3, int64_t{board.firmware_version});
  board_upsert.bind(4, board.tick_hz);
  board_upsert.bind(5, board.ram_bytes);
  board_upsert.bind(6, started_at_ns);
  const int64_t board_id = single_id(board_upsert, db.path, doing_board);

  detail::Statement probe_upsert(
      db,
      "INSERT INTO probes (board_id, rail_id, name) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (board_id, rail_id) DO UPDATE SET name = excluded.name");
  probe_upsert.bind(1, board_id);
  for (const probes::Rail& rail : board.rails) {
    probe_upsert.bind(2, int64_t{rail.id});
    probe_upsert.bind(3, std::string_view(rail.name));
    probe_upsert.run(doing_board);
  }

  std::optional<int64_t> mode_id;
  if (!board.power_mode.empty()) {
    detail::Statement mode_upsert(
        db,
        "INSERT INTO power_modes (board_id, name) VALUES (?1, ?2) "
        "ON CONFLICT (board_id, name) DO UPDATE SET name = excluded.name RETURNING id");
    mode_upsert.bind(1, board_id);
    mode_upsert.bind(2, std::string_view(board.power_mode));
    mode_id = single_id(mode_upsert, db.path, doing_board);
    if (board.mode_switch_ns && *board.mode_switch_ns > 0) {  // 0: an answer to a repeated request
      detail::Statement keep(
          db, db.postgres() ? "UPDATE power_modes SET params_json = "
                              "jsonb_set(params_json::jsonb, '{switch_ns}', to_jsonb(?2::bigint))::text "
                              "WHERE id = ?1"
                            : "UPDATE power_modes SET params_json = json_set(params_json, '$.switch_ns', ?2) "
                              "WHERE id = ?1");
      keep.bind(1, *mode_id);
      keep.bind(2, static_cast<int64_t>(*board.mode_switch_ns));
      keep.run(doing_board);
    }
  }

  detail::Statement run_insert(
      db,
      "INSERT INTO runs (board_id, source, started_at_ns, status, power_mode_id, device_time_scale, plan, link) "
      "VALUES (?1, ?2, ?3, 'recording', ?4, ?5, ?6, ?7) RETURNING id");
  run_insert.bind(1, board_id);
  run_insert.bind(2, source);
  run_insert.bind(3, started_at_ns);
  if (mode_id) run_insert.bind(4, *mode_id);
  else run_insert.bind_null(4);
  run_insert.bind(5, board.time_scale);
  run_insert.bind(6, to_string(plan));
  if (link.empty()) run_insert.bind_null(7);
  else run_insert.bind(7, link);
  impl_->run_id = single_id(run_insert, db.path, "cannot start a run of " + board.name);

  const std::string of_run = " of run " + std::to_string(impl_->run_id);
  impl_->doing_ops = "cannot store ops" + of_run;
  impl_->doing_spans = "cannot store spans" + of_run;
  impl_->doing_samples = "cannot store samples" + of_run;
  impl_->doing_sync = "cannot store sync points" + of_run;
  impl_->doing_events = "cannot store events" + of_run;
  impl_->doing_update = "cannot update the status" + of_run;
  if (db.postgres()) {
    impl_->sample_copy = std::make_unique<detail::CopyBuffer>(
        db, "power_samples (run_id, rowid, t_ticks, bus_uv, current_ua, power_uw, rail, flags)",
        impl_->doing_samples);
    impl_->span_copy = std::make_unique<detail::CopyBuffer>(
        db, "op_spans (run_id, op_id, phase, begin_ticks, end_ticks, repetitions)", impl_->doing_spans);
    // Held while this session lives: readers tell a run being recorded from one whose
    // recorder is gone (killed, or cut off from the server).
    detail::Statement lock(db, "SELECT pg_advisory_lock(?1)");
    lock.bind(1, detail::run_lock_key(impl_->run_id));
    lock.run("cannot start a run of " + board.name);
    // Other recorders wait on the board's row until this commits: commit now.
    db.commit_batch();
  }
}

RunWriter::RunWriter(RunWriter&&) noexcept = default;
RunWriter::~RunWriter() = default;

int64_t RunWriter::run_id() const { return impl_->run_id; }

void RunWriter::add_op(uint32_t op_id, const profiler::OpShape& shape, profiler::Phase phase, uint16_t copies) {
  Impl& w = *impl_;
  w.db->ensure_batch();
  const std::string dims = profiler::dims_text(shape);
  const std::string_view kind = profiler::to_string(shape.kind);

  for (detail::Statement* stmt :
       {&w.prepared(w.shape_insert,
                    "INSERT INTO op_shapes (kind, dims, flops, bytes_in, bytes_out) "
                    "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING"),
        &w.prepared(w.shape_select,
                    "SELECT id FROM op_shapes WHERE kind = ?1 AND dims = ?2 AND flops = ?3 "
                    "AND bytes_in = ?4 AND bytes_out = ?5")}) {
    stmt->bind(1, kind);
    stmt->bind(2, std::string_view(dims));
    stmt->bind(3, shape.flops);
    stmt->bind(4, shape.bytes_in);
    stmt->bind(5, shape.bytes_out);
  }
  w.shape_insert.run(w.doing_ops);
  const int64_t shape_id = single_id(w.shape_select, w.db->path, w.doing_ops);
  // Two recorders declaring the same new shapes in another order would wait on each other's
  // uncommitted rows: on a shared server each new shape commits at once.
  if (w.db->postgres() && w.shape_insert.changes() > 0) w.db->commit_batch();

  detail::Statement& insert = w.prepared_for_run(
      w.run_op_insert,
      "INSERT INTO run_ops (run_id, op_id, shape_id, phase, copies) VALUES (?1, ?2, ?3, ?4, ?5)");
  insert.bind(2, int64_t{op_id});
  insert.bind(3, shape_id);
  insert.bind(4, profiler::to_string(phase));
  insert.bind(5, int64_t{copies});
  insert.run(w.doing_ops);
}

void RunWriter::add_span(const profiler::OpSpan& span) {
  Impl& w = *impl_;
  w.db->ensure_batch();
  if (w.span_copy) {
    detail::CopyBuffer& copy = *w.span_copy;
    copy.begin_row(6);
    copy.add_int64(w.run_id);
    copy.add_int64(int64_t{span.op_id});
    copy.add_text(profiler::to_string(span.phase));
    copy.add_int64(static_cast<int64_t>(span.begin_ticks));
    copy.add_int64(static_cast<int64_t>(span.end_ticks));
    copy.add_int64(int64_t{span.repetitions});
    copy.end_row();
    return;
  }
  detail::Statement& insert =
      w.prepared_for_run(w.span_insert,
                 "INSERT INTO op_spans (run_id, op_id, phase, begin_ticks, end_ticks, repetitions) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  insert.bind(2, int64_t{span.op_id});
  insert.bind(3, profiler::to_string(span.phase));
  insert.bind(4, span.begin_ticks);
  insert.bind(5, span.end_ticks);
  insert.bind(6, int64_t{span.repetitions});
  insert.run(w.doing_spans);
}

void RunWriter::add_samples(std::span<const probes::PowerSample> samples) {
  Impl& w = *impl_;
  w.db->ensure_batch();
  if (w.sample_copy) {
    detail::CopyBuffer& copy = *w.sample_copy;
    for (const probes::PowerSample& s : samples) {
      copy.begin_row(8);
      copy.add_int64(w.run_id);
      copy.add_int64(w.next_sample_rowid++);
      copy.add_int64(static_cast<int64_t>(s.t_ticks));
      copy.add_int32(s.bus_uv);
      copy.add_int32(s.current_ua);
      copy.add_int32(s.power_uw);
      copy.add_int16(s.rail);
      copy.add_int16(s.flags);
      copy.end_row();
    }
    return;
  }
  while (!samples.empty()) {
    const std::size_t rows = std::min(samples.size(), kMaxSampleRows);
    sqlite3_stmt* stmt = w.sample_insert(rows);
    int index = 2;
    for (const probes::PowerSample& s : samples.first(rows)) {
      sqlite3_bind_int(stmt, index, s.rail);
      sqlite3_bind_int64(stmt, index + 1, static_cast<int64_t>(s.t_ticks));
      sqlite3_bind_int(stmt, index + 2, s.bus_uv);
      sqlite3_bind_int(stmt, index + 3, s.current_ua);
      sqlite3_bind_int(stmt, index + 4, s.power_uw);
      sqlite3_bind_int(stmt, index + 5, s.flags);
      index += kSampleParams;
    }
    w.sample_inserts[rows].run(w.doing_samples);
    samples = samples.subspan(rows);
  }
}

void RunWriter::add_sync(const SyncPoint& sync) {
  Impl& w = *impl_;
  w.db->ensure_batch();
  detail::Statement& insert = w.prepared_for_run(
      w.sync_insert,
      "INSERT INTO sync_points (run_id, sync_id, host_tx_ns, device_rx_ticks, device_tx_ticks, "
      "host_rx_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  insert.bind(2, int64_t{sync.sync_id});
  insert.bind(3, sync.host_tx_ns);
  insert.bind(4, sync.device_rx_ticks);
  insert.bind(5, sync.device_tx_ticks);
  insert.bind(6, sync.host_rx_ns);
  insert.run(w.doing_sync);
}

void RunWriter::add_event(int64_t host_ns, std::string_view kind, std::string_view text) {
  Impl& w = *impl_;
  w.db->ensure_batch();
  detail::Statement& insert = w.prepared_for_run(
      w.event_insert,
      "INSERT INTO run_events (run_id, host_ns, kind, text) VALUES (?1, ?2, ?3, ?4)");
  insert.bind(2, host_ns);
  insert.bind(3, kind);
  insert.bind(4, text);
  insert.run(w.doing_events);
}

void RunWriter::update(RunStatus status, const LinkCounters& counters, int64_t ended_at_ns) {
  Impl& w = *impl_;
  w.db->ensure_batch();
  detail::Statement& stmt = w.prepared_for_run(
      w.run_update,
      "UPDATE runs SET status = ?2, ended_at_ns = ?3, bytes = ?4, frames_ok = ?5, "
      "frames_lost = ?6, crc_errors = ?7, malformed = ?8, device_spans_sent = ?9, "
      "device_samples_sent = ?10, device_frames_sent = ?11 WHERE id = ?1");
  stmt.bind(2, to_string(status));
  // A run still recording has no end yet, whatever the caller passed.
  if (status == RunStatus::kRecording) {
    stmt.bind_null(3);
  } else {
    stmt.bind(3, ended_at_ns);
  }
  stmt.bind(4, counters.bytes);
  stmt.bind(5, counters.frames_ok);
  stmt.bind(6, counters.frames_lost);
  stmt.bind(7, counters.crc_errors);
  stmt.bind(8, counters.malformed);
  int index = 9;
  for (const std::optional<uint64_t>& sent :
       {counters.device_spans_sent, counters.device_samples_sent, counters.device_frames_sent}) {
    if (sent) {
      stmt.bind(index, *sent);
    } else {
      stmt.bind_null(index);
    }
    ++index;
  }
  stmt.run(w.doing_update);
}

}  // namespace ergon::costdb
