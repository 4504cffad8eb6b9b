#include "costdb/schema.h"

#include <array>
#include <string>

#include "common/error.h"
#include "costdb/database.h"
#include "costdb/database_impl.h"

namespace ergon::costdb::detail {
namespace {

struct Migration {
  int version;      ///< user_version after this migration
  const char* sql;  ///< runs inside the migration transaction
};

// Append only: a released migration is never edited, a change is a new numbered migration.
// Integer columns hold uint64 values bit-cast to int64 (ticks, byte counts); text enums use the
// names of profiler::to_string and costdb::to_string. Raw tables (op_spans, power_samples,
// sync_points, run_events) store what arrived without judging it; derived tables (op_costs,
// paging_costs, plans, validations) can be rebuilt from them.
// power_samples is the bulk ingest path: no secondary index, no foreign key, no CHECKs.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE boards (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  firmware_version INTEGER NOT NULL DEFAULT 0 CHECK (firmware_version >= 0),
  tick_hz INTEGER NOT NULL CHECK (tick_hz >= 0),
  ram_bytes INTEGER NOT NULL CHECK (ram_bytes >= 0),
  first_seen_ns INTEGER NOT NULL,
  UNIQUE (kind, name)
) STRICT;

CREATE TABLE probes (
  id INTEGER PRIMARY KEY,
  board_id INTEGER NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
  rail_id INTEGER NOT NULL CHECK (rail_id BETWEEN 0 AND 255),
  name TEXT NOT NULL,
  kind TEXT,
  UNIQUE (board_id, rail_id)
) STRICT;

CREATE TABLE power_modes (
  id INTEGER PRIMARY KEY,
  board_id INTEGER NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  params_json TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(params_json)),
  UNIQUE (board_id, name)
) STRICT;

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  board_id INTEGER NOT NULL REFERENCES boards (id),
  power_mode_id INTEGER REFERENCES power_modes (id),
  source TEXT NOT NULL,
  started_at_ns INTEGER NOT NULL,
  ended_at_ns INTEGER,
  status TEXT NOT NULL DEFAULT 'recording'
    CHECK (status IN ('recording', 'completed', 'stopped', 'disconnected', 'failed')),
  bytes INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0),
  frames_ok INTEGER NOT NULL DEFAULT 0 CHECK (frames_ok >= 0),
  frames_lost INTEGER NOT NULL DEFAULT 0 CHECK (frames_lost >= 0),
  crc_errors INTEGER NOT NULL DEFAULT 0 CHECK (crc_errors >= 0),
  malformed INTEGER NOT NULL DEFAULT 0 CHECK (malformed >= 0),
  device_spans_sent INTEGER CHECK (device_spans_sent >= 0),
  device_samples_sent INTEGER CHECK (device_samples_sent >= 0),
  device_frames_sent INTEGER CHECK (device_frames_sent >= 0)
) STRICT;
CREATE INDEX runs_board ON runs (board_id);

CREATE TABLE op_shapes (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL
    CHECK (kind IN ('conv2d', 'linear', 'relu', 'maxpool', 'add', 'paging', 'idle')),
  dims TEXT NOT NULL,
  flops INTEGER NOT NULL CHECK (flops >= 0),
  bytes_in INTEGER NOT NULL CHECK (bytes_in >= 0),
  bytes_out INTEGER NOT NULL CHECK (bytes_out >= 0),
  UNIQUE (kind, dims, flops, bytes_in, bytes_out)
) STRICT;

CREATE TABLE run_ops (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op_id INTEGER NOT NULL CHECK (op_id >= 0),
  shape_id INTEGER NOT NULL REFERENCES op_shapes (id),
  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'recompute', 'page-in',
                                       'page-out', 'idle', 'sync')),
  PRIMARY KEY (run_id, op_id)
) STRICT;
CREATE INDEX run_ops_shape ON run_ops (shape_id);

CREATE TABLE op_spans (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op_id INTEGER NOT NULL,
  phase TEXT NOT NULL,
  begin_ticks INTEGER NOT NULL,
  end_ticks INTEGER NOT NULL,
  repetitions INTEGER NOT NULL
) STRICT;
CREATE INDEX op_spans_run ON op_spans (run_id);

CREATE TABLE power_samples (
  run_id INTEGER NOT NULL,
  rail INTEGER NOT NULL,
  t_ticks INTEGER NOT NULL,
  bus_uv INTEGER NOT NULL,
  current_ua INTEGER NOT NULL,
  power_uw INTEGER NOT NULL,
  flags INTEGER NOT NULL
) STRICT;
-- No foreign key on power_samples.run_id: checking it costs a lookup in runs per sample (about
-- a third of the ingest rate, measured). RunWriter only writes ids of runs it inserted; this
-- trigger gives the cascade on delete that the foreign key would have.
CREATE TRIGGER runs_delete_samples AFTER DELETE ON runs BEGIN
  DELETE FROM power_samples WHERE run_id = old.id;
END;

CREATE TABLE sync_points (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  sync_id INTEGER NOT NULL,
  host_tx_ns INTEGER NOT NULL,
  device_rx_ticks INTEGER NOT NULL,
  device_tx_ticks INTEGER NOT NULL,
  host_rx_ns INTEGER NOT NULL
) STRICT;
CREATE INDEX sync_points_run ON sync_points (run_id);

CREATE TABLE run_events (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  host_ns INTEGER NOT NULL,
  kind TEXT NOT NULL,
  text TEXT NOT NULL
) STRICT;
CREATE INDEX run_events_run ON run_events (run_id);

CREATE TABLE op_costs (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op_id INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'recompute', 'page-in',
                                       'page-out', 'idle', 'sync')),
  time_s REAL NOT NULL CHECK (time_s >= 0),
  time_s_stddev REAL CHECK (time_s_stddev >= 0),
  gross_energy_j REAL NOT NULL,
  net_energy_j REAL NOT NULL,
  energy_j_stddev REAL CHECK (energy_j_stddev >= 0),
  sample_count INTEGER NOT NULL CHECK (sample_count >= 0),
  PRIMARY KEY (run_id, op_id, phase)
) STRICT;

CREATE TABLE paging_costs (
  board_id INTEGER NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
  power_mode_id INTEGER REFERENCES power_modes (id),
  storage TEXT NOT NULL,
  bytes INTEGER NOT NULL CHECK (bytes > 0),
  direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
  latency_s REAL NOT NULL CHECK (latency_s >= 0),
  bandwidth_bytes_per_s REAL NOT NULL CHECK (bandwidth_bytes_per_s > 0),
  energy_j_per_byte REAL NOT NULL
) STRICT;
CREATE INDEX paging_costs_board ON paging_costs (board_id, storage, direction, bytes);

CREATE TABLE plans (
  id INTEGER PRIMARY KEY,
  model TEXT NOT NULL,
  board_id INTEGER NOT NULL REFERENCES boards (id),
  budget_bytes INTEGER NOT NULL CHECK (budget_bytes >= 0),
  deadline_s REAL CHECK (deadline_s > 0),
  planner TEXT NOT NULL,
  status TEXT NOT NULL,
  objective_j REAL,
  bound_j REAL,
  solve_time_s REAL CHECK (solve_time_s >= 0),
  schedule BLOB,
  created_at_ns INTEGER NOT NULL
) STRICT;
CREATE INDEX plans_board ON plans (board_id);

CREATE TABLE validations (
  id INTEGER PRIMARY KEY,
  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  predicted_energy_j REAL,
  measured_energy_j REAL,
  predicted_time_s REAL,
  measured_time_s REAL,
  predicted_peak_bytes INTEGER CHECK (predicted_peak_bytes >= 0),
  measured_peak_bytes INTEGER CHECK (measured_peak_bytes >= 0)
) STRICT;
CREATE INDEX validations_plan ON validations (plan_id);
CREATE INDEX validations_run ON validations (run_id);
)sql";

// v2: plans carry what a Pareto sweep needs to compare and resume: the objective, a digest of
// the graph and costs planned (a plan is reused only for the same one), the simulator's
// energy, time and peak memory, and the gap.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE plans ADD COLUMN objective TEXT NOT NULL DEFAULT 'poet';
ALTER TABLE plans ADD COLUMN graph_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE plans ADD COLUMN gap REAL;
ALTER TABLE plans ADD COLUMN energy_j REAL;
ALTER TABLE plans ADD COLUMN time_s REAL;
ALTER TABLE plans ADD COLUMN paging_time_s REAL;
ALTER TABLE plans ADD COLUMN peak_bytes INTEGER CHECK (peak_bytes >= 0);
CREATE INDEX plans_key ON plans (graph_digest, planner, objective, budget_bytes);
)sql";

// v3: what attributing a run found besides its op costs (derived, rebuilt with op_costs): the
// clock fit and its residuals, the idle power, and how many windows lost their samples.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE run_attributions (
  run_id INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  clock_fitted INTEGER NOT NULL CHECK (clock_fitted IN (0, 1)),
  clock_drift_ppm REAL NOT NULL,
  clock_residual_rms_ns REAL NOT NULL,
  clock_residual_max_ns REAL NOT NULL,
  clock_points_used INTEGER NOT NULL CHECK (clock_points_used >= 0),
  clock_points_total INTEGER NOT NULL CHECK (clock_points_total >= 0),
  clock_note TEXT NOT NULL,
  sample_period_s REAL NOT NULL,
  idle_power_w REAL NOT NULL,
  idle_power_sigma_w REAL NOT NULL,
  idle_samples INTEGER NOT NULL CHECK (idle_samples >= 0),
  samples_flagged INTEGER NOT NULL CHECK (samples_flagged >= 0),
  windows INTEGER NOT NULL CHECK (windows >= 0),
  windows_uncovered INTEGER NOT NULL CHECK (windows_uncovered >= 0)
) STRICT;
)sql";

// v4: a board measured by a power logger (a second device on its own link and clock) takes
// its power samples from the logger's run. A trigger, not a foreign key, forgets a deleted
// logger run (SQLite cannot add a column with a foreign key action to an existing table and
// drop it again).
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE runs ADD COLUMN power_run_id INTEGER;
CREATE TRIGGER runs_delete_power_run AFTER DELETE ON runs BEGIN
  UPDATE runs SET power_run_id = NULL WHERE power_run_id = old.id;
END;
)sql";

// v5: every op kind of protocol v3 (profiler::OpKind), so a board can time each of the zoo's
// ops with its own kernel. SQLite cannot change a CHECK in place: the table is rebuilt with
// the same ids (migrate() runs with foreign keys off and checks them before committing).
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE op_shapes_v5 (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL
    CHECK (kind IN ('conv2d', 'linear', 'relu', 'maxpool', 'add', 'paging', 'idle', 'batchnorm',
                    'layernorm', 'relu6', 'gelu', 'tanh', 'avgpool', 'embedding',
                    'attention_scores', 'attention_context', 'cross_entropy')),
  dims TEXT NOT NULL,
  flops INTEGER NOT NULL CHECK (flops >= 0),
  bytes_in INTEGER NOT NULL CHECK (bytes_in >= 0),
  bytes_out INTEGER NOT NULL CHECK (bytes_out >= 0),
  UNIQUE (kind, dims, flops, bytes_in, bytes_out)
) STRICT;
INSERT INTO op_shapes_v5 (id, kind, dims, flops, bytes_in, bytes_out)
  SELECT id, kind, dims, flops, bytes_in, bytes_out FROM op_shapes;
DROP TABLE op_shapes;
ALTER TABLE op_shapes_v5 RENAME TO op_shapes;
)sql";

// v6: a plan remembers the power mode whose costs it was made on (the Pareto view's mode
// dimension; ergon pareto --power-mode all).
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE plans ADD COLUMN power_mode TEXT NOT NULL DEFAULT '';
)sql";

// v7: a plan says whose costs it was made on in a column of its own. Before, it hung off a
// boards row named "profile" or "measured"; new plans hang off their board kind's row with an
// empty name (a kind, no particular board).
constexpr const char* kSchemaV7 = R"sql(
ALTER TABLE plans ADD COLUMN cost_source TEXT NOT NULL DEFAULT 'profile'
  CHECK (cost_source IN ('profile', 'measured'));
UPDATE plans SET cost_source = 'measured'
  WHERE board_id IN (SELECT id FROM boards WHERE name = 'measured');
)sql";

// v8: a cost measured without power samples (a board with no power probe, ergon-agent
// --probe none) has a time and no energy: the energies become nullable, both or neither.
// op_costs is derived, so it is rebuilt as it stands. A run keeps how fast its board's time
// ran against real time (a simulator's speed; protocol v5's Hello), which its clock fit expects.
constexpr const char* kSchemaV8 = R"sql(
CREATE TABLE op_costs_v8 (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op_id INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'recompute', 'page-in',
                                       'page-out', 'idle', 'sync')),
  time_s REAL NOT NULL CHECK (time_s >= 0),
  time_s_stddev REAL CHECK (time_s_stddev >= 0),
  gross_energy_j REAL,
  net_energy_j REAL,
  energy_j_stddev REAL CHECK (energy_j_stddev >= 0),
  sample_count INTEGER NOT NULL CHECK (sample_count >= 0),
  PRIMARY KEY (run_id, op_id, phase),
  CHECK ((gross_energy_j IS NULL) = (net_energy_j IS NULL))
) STRICT;
INSERT INTO op_costs_v8 SELECT run_id, op_id, phase, time_s, time_s_stddev, gross_energy_j,
  net_energy_j, energy_j_stddev, sample_count FROM op_costs;
DROP TABLE op_costs;
ALTER TABLE op_costs_v8 RENAME TO op_costs;
ALTER TABLE runs ADD COLUMN device_time_scale REAL NOT NULL DEFAULT 1 CHECK (device_time_scale >= 0);
)sql";

// v9: a run says what it ran, so that a validation's schedule steps (several iterations of
// them, each step a window) are never taken for a profile's op costs. NULL: recorded before.
constexpr const char* kSchemaV9 = R"sql(
ALTER TABLE runs ADD COLUMN plan TEXT CHECK (plan IN ('profile', 'schedule', 'execute'));
)sql";

// v10: link transfers (protocol v6). Transfers are an op kind and link-send/link-receive two
// phases, so the tables whose CHECKs list them are rebuilt with the same rows; a run says
// which link it ran over, and link_costs keeps what the transfers measured, per board, mode,
// link kind and direction (derived, like paging_costs).
constexpr const char* kSchemaV10 = R"sql(
CREATE TABLE op_shapes_v10 (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL
    CHECK (kind IN ('conv2d', 'linear', 'relu', 'maxpool', 'add', 'paging', 'idle', 'batchnorm',
                    'layernorm', 'relu6', 'gelu', 'tanh', 'avgpool', 'embedding',
                    'attention_scores', 'attention_context', 'cross_entropy', 'transfer')),
  dims TEXT NOT NULL,
  flops INTEGER NOT NULL CHECK (flops >= 0),
  bytes_in INTEGER NOT NULL CHECK (bytes_in >= 0),
  bytes_out INTEGER NOT NULL CHECK (bytes_out >= 0),
  UNIQUE (kind, dims, flops, bytes_in, bytes_out)
) STRICT;
INSERT INTO op_shapes_v10 (id, kind, dims, flops, bytes_in, bytes_out)
  SELECT id, kind, dims, flops, bytes_in, bytes_out FROM op_shapes;
CREATE TABLE run_ops_v10 (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op_id INTEGER NOT NULL CHECK (op_id >= 0),
  shape_id INTEGER NOT NULL REFERENCES op_shapes_v10 (id),
  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'recompute', 'page-in',
                                       'page-out', 'idle', 'sync', 'link-send', 'link-receive')),
  PRIMARY KEY (run_id, op_id)
) STRICT;
INSERT INTO run_ops_v10 SELECT run_id, op_id, shape_id, phase FROM run_ops;
DROP TABLE run_ops;
DROP TABLE op_shapes;
ALTER TABLE op_shapes_v10 RENAME TO op_shapes;
ALTER TABLE run_ops_v10 RENAME TO run_ops;
CREATE INDEX run_ops_shape ON run_ops (shape_id);
CREATE TABLE op_costs_v10 (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op_id INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'recompute', 'page-in',
                                       'page-out', 'idle', 'sync', 'link-send', 'link-receive')),
  time_s REAL NOT NULL CHECK (time_s >= 0),
  time_s_stddev REAL CHECK (time_s_stddev >= 0),
  gross_energy_j REAL,
  net_energy_j REAL,
  energy_j_stddev REAL CHECK (energy_j_stddev >= 0),
  sample_count INTEGER NOT NULL CHECK (sample_count >= 0),
  PRIMARY KEY (run_id, op_id, phase),
  CHECK ((gross_energy_j IS NULL) = (net_energy_j IS NULL))
) STRICT;
INSERT INTO op_costs_v10 SELECT run_id, op_id, phase, time_s, time_s_stddev, gross_energy_j,
  net_energy_j, energy_j_stddev, sample_count FROM op_costs;
DROP TABLE op_costs;
ALTER TABLE op_costs_v10 RENAME TO op_costs;
ALTER TABLE runs ADD COLUMN link TEXT;
CREATE TABLE link_costs (
  board_id INTEGER NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
  power_mode_id INTEGER REFERENCES power_modes (id),
  link TEXT NOT NULL,
  direction TEXT NOT NULL CHECK (direction IN ('send', 'receive')),
  bytes INTEGER NOT NULL CHECK (bytes > 0),
  time_s REAL NOT NULL CHECK (time_s > 0),
  latency_s REAL NOT NULL CHECK (latency_s >= 0),
  bandwidth_bytes_per_s REAL NOT NULL CHECK (bandwidth_bytes_per_s > 0),
  net_energy_j REAL,
  energy_j_per_byte REAL,
  runs INTEGER NOT NULL CHECK (runs > 0)
) STRICT;
CREATE INDEX link_costs_board ON link_costs (board_id, link, direction, bytes);
)sql";

// v11: an op of a profile plan says how many copies of its tensors the board cycled
// through (protocol v8): 0, enough to read them from memory each run, the op costs planners
// use; 1, warm; k, at a reuse distance of k - 1 copies (the cost model's cache curve).
constexpr const char* kSchemaV11 = R"sql(
ALTER TABLE run_ops ADD COLUMN copies INTEGER NOT NULL DEFAULT 0 CHECK (copies >= 0);
)sql";

// v12: a plan on measured costs says where their times were taken: the profile's windows,
// or executed iterations' steps standing for their shapes (--costs iteration).
constexpr const char* kSchemaV12 = R"sql(
ALTER TABLE plans ADD COLUMN costs_timed_in TEXT NOT NULL DEFAULT 'profile'
  CHECK (costs_timed_in IN ('profile', 'iteration'));
)sql";

constexpr std::array kMigrations{
    Migration{1, kSchemaV1},
    Migration{2, kSchemaV2},
    Migration{3, kSchemaV3},
    Migration{4, kSchemaV4},
    Migration{5, kSchemaV5},
    Migration{6, kSchemaV6},
    Migration{7, kSchemaV7},
    Migration{8, kSchemaV8},
    Migration{9, kSchemaV9},
    Migration{10, kSchemaV10},
    Migration{11, kSchemaV11},
    Migration{12, kSchemaV12},
};
static_assert(kMigrations.back().version == kSchemaVersion,
              "the last migration must bring a file to kSchemaVersion");

bool has_tables(sqlite3* db, const std::filesystem::path& path) {
  sqlite3_stmt* query = nullptr;
  int rc = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_schema LIMIT 1", -1, &query, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(query);
  sqlite3_finalize(query);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) throw_sqlite(db, rc, path, "cannot read the schema");
  return rc == SQLITE_ROW;
}

}  // namespace

int read_schema_version(sqlite3* db, const std::filesystem::path& path) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  const int version = rc == SQLITE_ROW ? sqlite3_column_int(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc == SQLITE_ROW) {
    check_schema_version("database " + path.string(), version, false);
    return version;
  }
  if ((rc & 0xff) == SQLITE_NOTADB) {
    throw DatabaseError("database " + path.string() + " is not an SQLite database file");
  }
  throw_sqlite(db, rc, path, "cannot read the schema version");
}

int migrate(sqlite3* db, const std::filesystem::path& path) {
  // Rebuilding a table, SQLite's way to change a constraint, needs foreign keys off, which
  // cannot change inside a transaction; they are checked before the commit instead.
  exec(db, "PRAGMA foreign_keys = OFF", path, "cannot start the schema migration");
  struct ForeignKeysBackOn {
    sqlite3* db;
    ~ForeignKeysBackOn() { sqlite3_exec(db, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr); }
  } back_on{db};
  exec(db, "BEGIN IMMEDIATE", path, "cannot start the schema migration");
  try {
    // Read inside the transaction: another process may have migrated the file meanwhile.
    int version = read_schema_version(db, path);
    if (version == 0 && has_tables(db, path)) {
      throw DatabaseError("database " + path.string() +
                          " is not an ergon database (it has tables but no ergon schema version)");
    }
    for (const Migration& migration : kMigrations) {
      if (migration.version <= version) continue;
      const std::string doing = "cannot migrate to schema version " +
                                std::to_string(migration.version);
      exec(db, migration.sql, path, doing);
      exec(db, ("PRAGMA user_version = " + std::to_string(migration.version)).c_str(), path,
           doing);
      version = migration.version;
    }
    sqlite3_stmt* check = nullptr;
    const int rc = sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &check, nullptr);
    const bool dangling = rc == SQLITE_OK && sqlite3_step(check) == SQLITE_ROW;
    sqlite3_finalize(check);
    if (rc != SQLITE_OK) throw_sqlite(db, rc, path, "cannot check the migrated file");
    if (dangling)
      throw DatabaseError("database " + path.string() + ": migrating to schema version " +
                          std::to_string(version) + " would leave rows without their parent; "
                          "the file is left as it was");
    exec(db, "COMMIT", path, "cannot commit the schema migration");
    return version;
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace ergon::costdb::detail
