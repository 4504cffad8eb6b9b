#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "probes/power.h"
#include "profiler/op.h"
#include "profiler/sync.h"

namespace ergon::costdb {

/// Schema version this build writes (PRAGMA user_version). Migrations in schema.cpp bring
/// older files up to it; a newer file is refused with DatabaseError.
inline constexpr int kSchemaVersion = 12;

/// True when a --db value names a PostgreSQL database rather than an SQLite file:
/// postgresql://user@host/db (or postgres://), or libpq's keyword=value form such as
/// "service=lab" or "host=/run/postgresql dbname=ergon".
bool is_postgres_locator(std::string_view locator);

/// True for a PostgreSQL locator (the server says when it connects) and for a file that exists.
bool database_exists(const std::filesystem::path& path);

/// An open cost database: an SQLite file (WAL, one writer; the embedded default) or a
/// PostgreSQL database (a lab's shared one, many writers). Not thread-safe: use it from one
/// thread. Writes go into a batch (one transaction) that commit_batch() makes durable; a
/// process killed between commits loses only the uncommitted batch and leaves a valid database.
class Database {
 public:
  /// Opens or creates the file (or connects to the PostgreSQL database, which must exist) and
  /// migrates it to kSchemaVersion. Throws DatabaseError (one line naming the path) when it
  /// cannot.
  static Database open(const std::filesystem::path& path);
  /// Opens an existing database without migrating or writing; for listing and export.
  static Database open_read_only(const std::filesystem::path& path);

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();  ///< commits an open batch

  [[nodiscard]] int schema_version() const;
  /// The schema version a file is at (0: not an ergon database), read without writing.
  [[nodiscard]] static int file_schema_version(const std::filesystem::path& path);
  /// The file, or the PostgreSQL locator without its password.
  [[nodiscard]] const std::filesystem::path& path() const;

  /// Makes every write since the last commit durable and opens the next batch.
  void commit_batch();

  /// True for a PostgreSQL database.
  [[nodiscard]] bool is_postgres() const;

  /// Result of PRAGMA integrity_check: "ok" for a sound file. Throws InputError on
  /// PostgreSQL, which checks its own pages.
  [[nodiscard]] std::string integrity_check();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Database(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct BoardInfo {
  std::string name;        ///< e.g. "pi4-sim"; boards are unique by (kind, name)
  std::string kind;        ///< "tx2", "pi4", "nrf52840", "mkr1000"
  uint32_t firmware_version = 0;
  uint64_t tick_hz = 0;
  uint64_t ram_bytes = 0;
  std::vector<probes::Rail> rails;
  /// The power mode the run is recorded in (power_modes table); empty when unknown.
  std::string power_mode;
  /// How long the board took to switch into that mode, when the host switched it for this
  /// run: kept with the mode (power_modes.params_json's switch_ns), the latest measurement.
  std::optional<uint64_t> mode_switch_ns;
  /// Board seconds per real second, as its Hello said (1: real time; a simulator's speed; 0:
  /// an unpaced simulator): what its clock fit expects.
  double time_scale = 1;
};

using profiler::SyncPoint;

/// What the host's decoder counted for a run (data faults are stored, never fatal).
struct LinkCounters {
  uint64_t bytes = 0;
  uint64_t frames_ok = 0;
  uint64_t frames_lost = 0;
  uint64_t crc_errors = 0;
  uint64_t malformed = 0;
  /// What the device said it sent (RunDone), when it said so.
  std::optional<uint64_t> device_spans_sent;
  std::optional<uint64_t> device_samples_sent;
  std::optional<uint64_t> device_frames_sent;
};

/// kInterrupted is never stored: on PostgreSQL, a run that says it is recording while no
/// recorder holds it (its recorder was killed, or lost the server) reads back as interrupted.
/// SQLite cannot tell, and such a run reads back as recording.
enum class RunStatus { kRecording, kCompleted, kStopped, kDisconnected, kFailed, kInterrupted };
std::string_view to_string(RunStatus status);

/// What a run ran: a profile plan, whose windows of repetitions are op costs to plan on; or a
/// schedule's steps one by one (ergon validate), timed or executed on real tensors, whose
/// windows measure a schedule and are no costs to plan on (planning on them would validate
/// predictions with their own measurements).
enum class RunPlan { kProfile, kSchedule, kExecute };
std::string_view to_string(RunPlan plan);

/// Records one run: the board, its rails (as probes), the op shapes of its plan, and the raw
/// spans, samples, sync points and events as they arrive. Inserts use prepared statements and
/// go into the database's current batch.
class RunWriter {
 public:
  RunWriter(Database& db, const BoardInfo& board, std::string_view source,
            int64_t started_at_ns, RunPlan plan = RunPlan::kProfile, std::string_view link = {});
  RunWriter(RunWriter&&) noexcept;
  ~RunWriter();

  [[nodiscard]] int64_t run_id() const;

  /// Declares plan op `op_id` of this run (shapes are shared across runs).
  /// `copies`: of the op's tensors, cycled through by the board (PlannedOp::copies).
  void add_op(uint32_t op_id, const profiler::OpShape& shape, profiler::Phase phase, uint16_t copies = 0);
  void add_span(const profiler::OpSpan& span);
  void add_samples(std::span<const probes::PowerSample> samples);
  void add_sync(const SyncPoint& sync);
  /// A timestamped note: device Log lines, disconnects, protocol warnings.
  void add_event(int64_t host_ns, std::string_view kind, std::string_view text);
  /// Stores the link counters and status; callable many times (the last one wins).
  void update(RunStatus status, const LinkCounters& counters, int64_t ended_at_ns);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct RunSummary {
  int64_t id = 0;
  std::string board_kind;
  std::string board_name;
  std::string source;
  int64_t started_at_ns = 0;
  std::optional<int64_t> ended_at_ns;
  RunStatus status = RunStatus::kRecording;
  uint64_t spans = 0;
  uint64_t samples = 0;
  uint64_t sync_points = 0;
  LinkCounters counters;
  /// The power logger's run that measured this board (its samples are on the logger's clock).
  std::optional<int64_t> power_run_id;
  std::string power_mode;  ///< empty when the board did not say
  std::optional<RunPlan> plan;  ///< none for runs recorded before schema version 9
  std::string link;  ///< the link kind a link test ran over (empty: not said)
};

std::vector<RunSummary> list_runs(Database& db);
std::optional<RunSummary> find_run(Database& db, int64_t run_id);

/// A line of a run's event log: what the host and the board said while it was recorded.
struct RunEvent {
  int64_t host_ns = 0;  ///< wall clock
  std::string kind;     ///< "power-mode", "warning", "device-info", "failed", ...
  std::string text;
};
/// The rails of the run's board (its probes), by rail id: "VDD_IN", "5V" (empty for an
/// unknown run).
std::vector<probes::Rail> list_rails(Database& db, int64_t run_id);
/// The run's events in the order they were stored (empty for an unknown run).
std::vector<RunEvent> list_events(Database& db, int64_t run_id);
/// Records that `logger_run_id` (a power logger's run) measured run_id's board. Throws
/// InputError when either run does not exist or the logger's run is the board's own.
void set_power_run(Database& db, int64_t run_id, int64_t logger_run_id);

/// Ends a run its recorder could not finish (the database went away under it): a run still
/// recording becomes failed at ended_at_ns with a "failed" event saying why. A run that already
/// ended is left as it is. Returns whether the run was ended here.
bool end_run_failed(Database& db, int64_t run_id, std::string_view reason, int64_t ended_at_ns);

/// Writes spans.csv, samples.csv, sync.csv, events.csv and ops.csv of a run into dir
/// (created if missing). Throws InputError for an unknown run.
void export_run_csv(Database& db, int64_t run_id, const std::filesystem::path& dir);

}  // namespace ergon::costdb
