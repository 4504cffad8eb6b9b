// Reading runs back: listing and CSV export.

#include "costdb/database.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <system_error>
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "costdb/database_impl.h"

namespace ergon::costdb {
namespace {

// Spans and sync points are counted through their run_id indexes. power_samples has no index
// (ingest speed), so its counts come from a scan: list_runs scans once for all runs and
// find_run once for its run.
std::string run_summary_sql(std::string_view samples_count, std::string_view tail) {
  std::string sql =
      "SELECT r.id, b.kind, b.name, r.source, r.started_at_ns, r.ended_at_ns, r.status, "
      "r.bytes, r.frames_ok, r.frames_lost, r.crc_errors, r.malformed, "
      "r.device_spans_sent, r.device_samples_sent, r.device_frames_sent, "
      "(SELECT COUNT(*) FROM op_spans s WHERE s.run_id = r.id), ";
  sql += samples_count;
  sql +=
      ", (SELECT COUNT(*) FROM sync_points y WHERE y.run_id = r.id), r.power_run_id, "
      "(SELECT m.name FROM power_modes m WHERE m.id = r.power_mode_id), r.plan, r.link "
      "FROM runs r JOIN boards b ON b.id = r.board_id ";
  sql += tail;
  return sql;
}

RunSummary read_summary(const detail::Statement& row, const std::filesystem::path& path) {
  RunSummary run;
  run.id = row.column_int64(0);
  run.board_kind = row.column_text(1);
  run.board_name = row.column_text(2);
  run.source = row.column_text(3);
  run.started_at_ns = row.column_int64(4);
  if (!row.column_is_null(5)) run.ended_at_ns = row.column_int64(5);
  const std::string_view status = row.column_text(6);
  const auto parsed = detail::run_status_from_string(status);
  if (!parsed) {
    throw DatabaseError("database " + path.string() + ": run " + std::to_string(run.id) +
                        " has an unknown status '" + std::string(status) + "'");
  }
  run.status = *parsed;
  run.counters.bytes = row.column_uint64(7);
  run.counters.frames_ok = row.column_uint64(8);
  run.counters.frames_lost = row.column_uint64(9);
  run.counters.crc_errors = row.column_uint64(10);
  run.counters.malformed = row.column_uint64(11);
  if (!row.column_is_null(12)) run.counters.device_spans_sent = row.column_uint64(12);
  if (!row.column_is_null(13)) run.counters.device_samples_sent = row.column_uint64(13);
  if (!row.column_is_null(14)) run.counters.device_frames_sent = row.column_uint64(14);
  run.spans = row.column_uint64(15);
  run.samples = row.column_uint64(16);
  run.sync_points = row.column_uint64(17);
  if (!row.column_is_null(18)) run.power_run_id = row.column_int64(18);
  if (!row.column_is_null(19)) run.power_mode = row.column_text(19);
  if (!row.column_is_null(20)) run.plan = detail::run_plan_from_string(row.column_text(20));
  if (!row.column_is_null(21)) run.link = row.column_text(21);
  return run;
}

enum class Column { kSigned, kUnsigned, kText };

/// Buffered CSV output into `<name>.tmp`, renamed over `<name>` by finish(): a failed export
/// leaves no half-written file under the final name.
class CsvFile {
 public:
  explicit CsvFile(std::filesystem::path path) : path_(std::move(path)) {
    tmp_path_ = path_;
    tmp_path_ += ".tmp";
    file_ = std::fopen(tmp_path_.c_str(), "wb");
    if (file_ == nullptr) fail();
    buffer_.reserve(kFlushBytes + 4096);
  }
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;
  ~CsvFile() {
    if (file_ != nullptr) {
      std::fclose(file_);
      std::error_code ec;
      std::filesystem::remove(tmp_path_, ec);
    }
  }

  void raw(std::string_view value) { buffer_ += value; }
  void text(std::string_view value) {
    if (value.find_first_of(",\"\r\n") == std::string_view::npos) {
      buffer_ += value;
      return;
    }
    buffer_ += '"';
    for (char c : value) {
      if (c == '"') buffer_ += '"';
      buffer_ += c;
    }
    buffer_ += '"';
  }
  template <typename Int>
  void number(Int value) {
    char digits[24];
    const auto [end, ec] = std::to_chars(std::begin(digits), std::end(digits), value);
    buffer_.append(digits, end);
  }
  void separator() { buffer_ += ','; }
  void end_row() {
    buffer_ += '\n';
    if (buffer_.size() >= kFlushBytes) flush();
  }

  void finish() {
    flush();
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) fail();
    std::error_code ec;
    std::filesystem::rename(tmp_path_, path_, ec);
    if (ec) throw InputError("cannot write " + path_.string() + ": " + ec.message());
  }

 private:
  static constexpr std::size_t kFlushBytes = 1 << 20;

  void flush() {
    if (buffer_.empty()) return;
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) fail();
    buffer_.clear();
  }
  [[noreturn]] void fail() const {
    throw InputError("cannot write " + path_.string() + ": " + std::strerror(errno));
  }

  std::filesystem::path path_;
  std::filesystem::path tmp_path_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
};

void export_table(Database::Impl& db, int64_t run_id, const std::filesystem::path& file,
                  std::string_view header, std::initializer_list<Column> columns,
                  std::string_view sql) {
  detail::Statement query(db, sql);
  query.bind(1, run_id);
  CsvFile csv(file);
  csv.raw(header);
  csv.end_row();
  const std::string doing = "cannot read run " + std::to_string(run_id);
  while (query.step(doing)) {
    int col = 0;
    for (Column column : columns) {
      if (col != 0) csv.separator();
      switch (column) {
        case Column::kSigned: csv.number(query.column_int64(col)); break;
        case Column::kUnsigned: csv.number(query.column_uint64(col)); break;
        case Column::kText: csv.text(query.column_text(col)); break;
      }
      ++col;
    }
    csv.end_row();
  }
  csv.finish();
}

/// PostgreSQL: a run still recording whose recorder's session holds no lock on it any more.
void mark_interrupted(Database::Impl& db, std::vector<RunSummary>& runs) {
  if (!db.postgres()) return;
  if (std::none_of(runs.begin(), runs.end(), [](const RunSummary& r) { return r.status == RunStatus::kRecording; }))
    return;
  detail::Statement held(db,
                         "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
                         "AND granted AND classid = ?1");
  held.bind(1, detail::kRunLockClass);
  std::unordered_set<int64_t> live;
  while (held.step("cannot read which runs are being recorded")) live.insert(held.column_int64(0));
  for (RunSummary& run : runs)
    if (run.status == RunStatus::kRecording && !live.contains(run.id & 0xffffffff))
      run.status = RunStatus::kInterrupted;
}

}  // namespace

std::vector<RunSummary> list_runs(Database& db) {
  Database::Impl& impl = db.impl();
  detail::Statement query(impl, run_summary_sql("0", "ORDER BY r.id"));
  std::vector<RunSummary> runs;
  while (query.step("cannot list runs")) runs.push_back(read_summary(query, impl.path));
  mark_interrupted(impl, runs);

  std::unordered_map<int64_t, std::size_t> index_of;
  for (std::size_t i = 0; i < runs.size(); ++i) index_of.emplace(runs[i].id, i);
  if (impl.postgres()) {
    // The server counts (a hash aggregate) rather than send every sample's run id over.
    detail::Statement counts(impl, "SELECT run_id, COUNT(*) FROM power_samples GROUP BY run_id");
    while (counts.step("cannot count samples")) {
      const auto found = index_of.find(counts.column_int64(0));
      if (found != index_of.end()) runs[found->second].samples = counts.column_uint64(1);
    }
    return runs;
  }
  // One pass over every sample (a GROUP BY would sort them all). Rows of a run are mostly
  // contiguous, so the last run found is checked first.
  detail::Statement scan(impl, "SELECT run_id FROM power_samples");
  int64_t last_id = 0;
  uint64_t* last_count = nullptr;
  while (scan.step("cannot count samples")) {
    const int64_t run_id = scan.column_int64(0);
    if (last_count == nullptr || run_id != last_id) {
      const auto found = index_of.find(run_id);
      if (found == index_of.end()) continue;
      last_id = run_id;
      last_count = &runs[found->second].samples;
    }
    ++*last_count;
  }
  return runs;
}

std::optional<RunSummary> find_run(Database& db, int64_t run_id) {
  Database::Impl& impl = db.impl();
  detail::Statement query(
      impl,
      run_summary_sql("(SELECT COUNT(*) FROM power_samples p WHERE p.run_id = r.id)",
                      "WHERE r.id = ?1"));
  query.bind(1, run_id);
  const std::string doing = "cannot read run " + std::to_string(run_id);
  if (!query.step(doing)) return std::nullopt;
  std::vector<RunSummary> runs{read_summary(query, impl.path)};
  query.reset();
  mark_interrupted(impl, runs);
  return runs.front();
}

std::vector<RunEvent> list_events(Database& db, int64_t run_id) {
  Database::Impl& impl = db.impl();
  detail::Statement q(impl, "SELECT host_ns, kind, text FROM run_events WHERE run_id = ?1 ORDER BY rowid");
  q.bind(1, run_id);
  std::vector<RunEvent> out;
  while (q.step("cannot read the events of run " + std::to_string(run_id)))
    out.push_back({q.column_int64(0), std::string(q.column_text(1)), std::string(q.column_text(2))});
  return out;
}

std::vector<probes::Rail> list_rails(Database& db, int64_t run_id) {
  Database::Impl& impl = db.impl();
  detail::Statement q(impl,
                      "SELECT p.rail_id, p.name FROM runs r JOIN probes p ON p.board_id = r.board_id "
                      "WHERE r.id = ?1 ORDER BY p.rail_id");
  q.bind(1, run_id);
  std::vector<probes::Rail> out;
  while (q.step("cannot read the rails of run " + std::to_string(run_id)))
    out.push_back({static_cast<uint8_t>(q.column_int64(0)), std::string(q.column_text(1))});
  return out;
}

void set_power_run(Database& db, int64_t run_id, int64_t logger_run_id) {
  for (int64_t id : {run_id, logger_run_id})
    if (!find_run(db, id))
      throw InputError("no run " + std::to_string(id) + " in " + db.path().string());
  if (run_id == logger_run_id)
    throw InputError("run " + std::to_string(run_id) + " cannot be its own power logger");
  Database::Impl& impl = db.impl();
  detail::Statement q(impl, "UPDATE runs SET power_run_id = ?2 WHERE id = ?1");
  q.bind(1, run_id);
  q.bind(2, logger_run_id);
  q.step("cannot link run " + std::to_string(run_id) + " to its power logger");
}

bool end_run_failed(Database& db, int64_t run_id, std::string_view reason, int64_t ended_at_ns) {
  Database::Impl& impl = db.impl();
  if (impl.read_only) throw DatabaseError("database " + impl.path.string() + " is open read-only");
  impl.ensure_batch();
  const std::string doing = "cannot end run " + std::to_string(run_id);
  detail::Statement end(impl, "UPDATE runs SET status = 'failed', ended_at_ns = ?2 WHERE id = ?1 AND status = 'recording'");
  end.bind(1, run_id);
  end.bind(2, ended_at_ns);
  end.run(doing);
  if (end.changes() == 0) return false;
  detail::Statement event(impl, "INSERT INTO run_events (run_id, host_ns, kind, text) VALUES (?1, ?2, 'failed', ?3)");
  event.bind(1, run_id);
  event.bind(2, ended_at_ns);
  event.bind(3, reason);
  event.run(doing);
  return true;
}

void export_run_csv(Database& db, int64_t run_id, const std::filesystem::path& dir) {
  Database::Impl& impl = db.impl();
  {
    detail::Statement exists(impl, "SELECT 1 FROM runs WHERE id = ?1");
    exists.bind(1, run_id);
    if (!exists.step("cannot read run " + std::to_string(run_id))) {
      throw InputError("no run " + std::to_string(run_id) + " in database " + impl.path.string());
    }
    exists.reset();
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("cannot create " + dir.string() + ": " + ec.message());

  using enum Column;
  export_table(impl, run_id, dir / "spans.csv", "op_id,phase,begin_ticks,end_ticks,repetitions",
               {kUnsigned, kText, kUnsigned, kUnsigned, kUnsigned},
               "SELECT op_id, phase, begin_ticks, end_ticks, repetitions FROM op_spans "
               "WHERE run_id = ?1 ORDER BY rowid");
  export_table(impl, run_id, dir / "samples.csv", "rail,t_ticks,bus_uv,current_ua,power_uw,flags",
               {kUnsigned, kUnsigned, kSigned, kSigned, kSigned, kUnsigned},
               "SELECT rail, t_ticks, bus_uv, current_ua, power_uw, flags FROM power_samples "
               "WHERE run_id = ?1 ORDER BY rowid");
  export_table(impl, run_id, dir / "sync.csv",
               "sync_id,host_tx_ns,device_rx_ticks,device_tx_ticks,host_rx_ns",
               {kUnsigned, kSigned, kUnsigned, kUnsigned, kSigned},
               "SELECT sync_id, host_tx_ns, device_rx_ticks, device_tx_ticks, host_rx_ns "
               "FROM sync_points WHERE run_id = ?1 ORDER BY rowid");
  export_table(impl, run_id, dir / "events.csv", "host_ns,kind,text", {kSigned, kText, kText},
               "SELECT host_ns, kind, text FROM run_events WHERE run_id = ?1 ORDER BY rowid");
  export_table(impl, run_id, dir / "ops.csv", "op_id,phase,kind,dims,flops,bytes_in,bytes_out,copies",
               {kUnsigned, kText, kText, kText, kUnsigned, kUnsigned, kUnsigned, kUnsigned},
               "SELECT o.op_id, o.phase, s.kind, s.dims, s.flops, s.bytes_in, s.bytes_out, o.copies "
               "FROM run_ops o JOIN op_shapes s ON s.id = o.shape_id WHERE o.run_id = ?1 "
               "ORDER BY o.op_id");
}

}  // namespace ergon::costdb
