// Opening, migrating, refusing and surviving crashes: what a user relies on from the file.

#include "costdb/database.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "costdb/costs.h"
#include "costdb_test_util.h"

namespace ergon::costdb {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::make_samples;
using testing::raw_exec;
using testing::raw_query;
using testing::read_file;
using testing::sim_board;

class DatabaseTest : public testing::TempDirTest {};

LinkCounters counters_with_bytes(uint64_t bytes) {
  LinkCounters counters;
  counters.bytes = bytes;
  return counters;
}

TEST_F(DatabaseTest, FreshFileGetsCurrentSchemaVersionAndWal) {
  {
    Database db = Database::open(db_path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(db.path(), db_path());
    EXPECT_EQ(db.integrity_check(), "ok");
  }
  EXPECT_EQ(raw_query(db_path(), "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(raw_query(db_path(), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM sqlite_schema WHERE name = 'power_samples'"),
            "1");
}

TEST_F(DatabaseTest, ReopeningAnUpToDateFileKeepsDataAndSchema) {
  int64_t run_id = 0;
  {
    Database db = Database::open(db_path());
    RunWriter run(db, sim_board(), "sim", 1);
    run_id = run.run_id();
  }
  const std::string schema_before =
      raw_query(db_path(), "SELECT group_concat(sql) FROM sqlite_schema");
  for (int i = 0; i < 3; ++i) {
    Database db = Database::open(db_path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    ASSERT_TRUE(find_run(db, run_id).has_value());
  }
  EXPECT_EQ(raw_query(db_path(), "SELECT group_concat(sql) FROM sqlite_schema"), schema_before);
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM runs"), "1");
}

TEST_F(DatabaseTest, NewerSchemaIsRefusedNamingBothVersionsAndFileIsUntouched) {
  ASSERT_EQ(raw_exec(db_path(), "CREATE TABLE future (x INTEGER); INSERT INTO future VALUES (7);"
                                "PRAGMA user_version = 99;"),
            SQLITE_OK);
  const std::string before = read_file(db_path());

  for (auto open : {&Database::open, &Database::open_read_only}) {
    try {
      (void)open(db_path());
      FAIL() << "a newer database was opened";
    } catch (const DatabaseError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(db_path().string()), HasSubstr("99"),
                                  HasSubstr("(" + std::to_string(kSchemaVersion) + ")"), HasSubstr("upgrade ergon")));
    }
  }
  EXPECT_EQ(read_file(db_path()), before);
  EXPECT_FALSE(std::filesystem::exists(db_path().string() + "-wal"));
}

TEST_F(DatabaseTest, GarbageFileIsRefusedCleanlyAndLeftAlone) {
  {
    std::ofstream out(db_path(), std::ios::binary);
    for (int i = 0; i < 1000; ++i) out << "this is not a database, it is a text file\n";
  }
  const std::string before = read_file(db_path());
  try {
    (void)Database::open(db_path());
    FAIL() << "a garbage file was opened";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(db_path().string()), HasSubstr("not an SQLite")));
  }
  EXPECT_THROW((void)Database::open_read_only(db_path()), DatabaseError);
  EXPECT_EQ(read_file(db_path()), before);
}

TEST_F(DatabaseTest, ForeignSqliteDatabaseIsRefused) {
  ASSERT_EQ(raw_exec(db_path(), "CREATE TABLE contacts (name TEXT)"), SQLITE_OK);
  try {
    (void)Database::open(db_path());
    FAIL() << "a foreign database was opened";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not an ergon database"));
  }
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM sqlite_schema"), "1");
}

TEST_F(DatabaseTest, MissingDirectoryGivesOneLineError) {
  try {
    (void)Database::open(dir_ / "no" / "such" / "dir" / "x.db");
    FAIL();
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open database"));
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_THROW((void)Database::open_read_only(dir_ / "missing.db"), DatabaseError);
}

TEST_F(DatabaseTest, SecondWriterIsRefusedAsBusyButReadersSeeCommittedData) {
  Database writer = Database::open(db_path());
  RunWriter run(writer, sim_board(), "sim", 1);
  writer.commit_batch();
  const auto samples = make_samples(10);
  run.add_samples(samples);  // uncommitted

  try {
    (void)Database::open(db_path());
    FAIL() << "a second writer was let in";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(std::string(e.what()),
              "database " + db_path().string() + " is busy (another ergon is writing to it?)");
  }

  Database reader = Database::open_read_only(db_path());
  auto seen = find_run(reader, run.run_id());
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->samples, 0U);
  EXPECT_EQ(reader.integrity_check(), "ok");
}

TEST_F(DatabaseTest, ReadOnlyOpenRefusesFileWithoutSchema) {
  { std::ofstream touch(db_path()); }
  EXPECT_THROW((void)Database::open_read_only(db_path()), DatabaseError);
}

TEST_F(DatabaseTest, DestructorCommitsTheOpenBatch) {
  int64_t run_id = 0;
  {
    Database db = Database::open(db_path());
    RunWriter run(db, sim_board(), "sim", 1);
    run_id = run.run_id();
    run.add_samples(make_samples(100));
  }
  Database db = Database::open_read_only(db_path());
  ASSERT_TRUE(find_run(db, run_id).has_value());
  EXPECT_EQ(find_run(db, run_id)->samples, 100U);
}

TEST_F(DatabaseTest, MovedDatabaseKeepsItsBatchAndWriters) {
  Database first = Database::open(db_path());
  RunWriter run(first, sim_board(), "sim", 1);
  Database moved = std::move(first);
  run.add_samples(make_samples(5));
  moved.commit_batch();
  EXPECT_EQ(find_run(moved, run.run_id())->samples, 5U);
}

TEST_F(DatabaseTest, ReadOnlyDatabaseRefusesWritesWithDatabaseError) {
  { Database create = Database::open(db_path()); }
  Database db = Database::open_read_only(db_path());
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  EXPECT_THROW(RunWriter(db, sim_board(), "sim", 1), DatabaseError);
  db.commit_batch();  // nothing to commit; no error
  EXPECT_TRUE(list_runs(db).empty());
}

TEST_F(DatabaseTest, RunWriterOutlivingItsDatabaseIsHarmless) {
  std::optional<Database> db = Database::open(db_path());
  RunWriter run(*db, sim_board(), "sim", 1);
  run.add_samples(make_samples(10));
  db.reset();  // commits; the writer's statements are finalized later, by its destructor
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM power_samples"), "10");
}

// A process killed mid-batch (no destructor, no commit) loses exactly that batch; the file
// recovers to a sound state with every committed row.
TEST_F(DatabaseTest, KilledWriterLosesOnlyTheUncommittedBatch) {
  constexpr std::size_t kCommitted = 10'000;
  constexpr std::size_t kUncommitted = 7'000;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      Database db = Database::open(db_path());
      RunWriter run(db, sim_board(), "sim", 1);
      run.add_span({1, profiler::Phase::kForward, 10, 20, 1});
      run.add_samples(make_samples(kCommitted));
      run.update(RunStatus::kRecording, counters_with_bytes(123), 0);
      db.commit_batch();
      run.add_samples(make_samples(kUncommitted, 10'000'000));
      run.add_span({2, profiler::Phase::kBackward, 30, 40, 1});
      run.update(RunStatus::kCompleted, counters_with_bytes(456), 99);
      kill(getpid(), SIGKILL);
    } catch (...) {
    }
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child failed before the kill, exit " << WEXITSTATUS(status);

  Database db = Database::open(db_path());
  EXPECT_EQ(db.integrity_check(), "ok");
  const auto runs = list_runs(db);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].samples, kCommitted);
  EXPECT_EQ(runs[0].spans, 1U);
  EXPECT_EQ(runs[0].status, RunStatus::kRecording);
  EXPECT_EQ(runs[0].counters.bytes, 123U);
  EXPECT_FALSE(runs[0].ended_at_ns.has_value());
}

TEST_F(DatabaseTest, AVersion7FileKeepsItsCostsAndStoresTimeOnlyCostsAfterMigrating) {
  {
    Database db = Database::open(db_path());
    RunWriter run(db, sim_board(), "sim", 1);
    run.add_op(1, profiler::relu(2048, profiler::Phase::kForward), profiler::Phase::kForward);
    OpCostRow row{.run_id = run.run_id(), .op_id = 1, .time_s = 0.5, .gross_energy_j = 2.0, .net_energy_j = 1.0};
    replace_attribution(db, run.run_id(), {}, std::span(&row, 1));
    db.commit_batch();
  }
  // Back to schema version 7: energies NOT NULL.
  raw_exec(db_path(),
           "PRAGMA foreign_keys = OFF; BEGIN;"
           "CREATE TABLE old_costs (run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE, "
           "op_id INTEGER NOT NULL, phase TEXT NOT NULL, time_s REAL NOT NULL, time_s_stddev REAL, "
           "gross_energy_j REAL NOT NULL, net_energy_j REAL NOT NULL, energy_j_stddev REAL, "
           "sample_count INTEGER NOT NULL, PRIMARY KEY (run_id, op_id, phase)) STRICT;"
           "INSERT INTO old_costs SELECT * FROM op_costs; DROP TABLE op_costs;"
           "ALTER TABLE old_costs RENAME TO op_costs; ALTER TABLE plans DROP COLUMN costs_timed_in; ALTER TABLE runs DROP COLUMN device_time_scale; ALTER TABLE runs DROP COLUMN plan; ALTER TABLE runs DROP COLUMN link; DROP TABLE link_costs; "
           "PRAGMA user_version = 7; COMMIT;");
  Database db = Database::open(db_path());
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  auto rows = list_op_costs(db, std::nullopt, std::nullopt);
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].gross_energy_j, 2.0);
  EXPECT_EQ(rows[0].net_energy_j, 1.0);
  EXPECT_FALSE(rows[0].run_plan.has_value()) << "a run from before version 9 does not say what it ran";
  // A cost without energy is stored as such, and read back without one (never as 0 J).
  OpCostRow timed{.run_id = rows[0].run_id, .op_id = 1, .time_s = 0.25};
  replace_attribution(db, rows[0].run_id, {}, std::span(&timed, 1));
  db.commit_batch();
  rows = list_op_costs(db, std::nullopt, std::nullopt);
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_DOUBLE_EQ(rows[0].time_s, 0.25);
  EXPECT_FALSE(rows[0].gross_energy_j.has_value());
  EXPECT_FALSE(rows[0].net_energy_j.has_value());
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM op_costs WHERE gross_energy_j IS NULL"), "1");
}

}  // namespace
}  // namespace ergon::costdb

namespace ergon::costdb {
namespace {

TEST_F(DatabaseTest, ABoardRunRemembersItsPowerLoggerUntilTheLoggerRunIsDeleted) {
  int64_t board_run = 0;
  int64_t logger_run = 0;
  {
    Database db = Database::open(db_path());
    BoardInfo logger = sim_board();
    logger.kind = "power-logger";
    logger.name = "logger-sim";
    board_run = RunWriter(db, sim_board(), "/dev/pts/3", 1).run_id();
    logger_run = RunWriter(db, logger, "/dev/pts/4", 1).run_id();
    set_power_run(db, board_run, logger_run);
    EXPECT_EQ(find_run(db, board_run)->power_run_id, logger_run);
    EXPECT_FALSE(find_run(db, logger_run)->power_run_id);
    EXPECT_THROW(set_power_run(db, board_run, board_run), InputError);
    EXPECT_THROW(set_power_run(db, board_run, 99), InputError);
  }
  ASSERT_EQ(raw_exec(db_path(), "DELETE FROM runs WHERE id = " + std::to_string(logger_run)), 0);
  Database db = Database::open_read_only(db_path());
  EXPECT_FALSE(find_run(db, board_run)->power_run_id) << "no dangling link to a deleted run";
}

TEST_F(DatabaseTest, AVersion4FileKeepsItsOpsAndStoresEveryOpKindAfterMigrating) {
  {
    Database db = Database::open(db_path());
    RunWriter run(db, sim_board(), "sim", 1);
    run.add_op(1, profiler::conv2d(1, 3, 8, 16, 16, 3, profiler::Phase::kForward), profiler::Phase::kForward);
    run.add_op(2, profiler::relu(2048, profiler::Phase::kForward), profiler::Phase::kForward);
  }
  // Back to schema version 4: op_shapes with the kinds of protocol v2 only.
  raw_exec(db_path(),
           "PRAGMA foreign_keys = OFF; BEGIN;"
           "CREATE TABLE old_shapes (id INTEGER PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN "
           "('conv2d', 'linear', 'relu', 'maxpool', 'add', 'paging', 'idle')), dims TEXT NOT NULL, "
           "flops INTEGER NOT NULL, bytes_in INTEGER NOT NULL, bytes_out INTEGER NOT NULL, "
           "UNIQUE (kind, dims, flops, bytes_in, bytes_out)) STRICT;"
           "INSERT INTO old_shapes SELECT * FROM op_shapes; DROP TABLE op_shapes;"
           "ALTER TABLE old_shapes RENAME TO op_shapes; ALTER TABLE plans DROP COLUMN power_mode; "
           "ALTER TABLE plans DROP COLUMN cost_source; ALTER TABLE plans DROP COLUMN costs_timed_in; ALTER TABLE runs DROP COLUMN device_time_scale; ALTER TABLE runs DROP COLUMN plan; ALTER TABLE runs DROP COLUMN link; DROP TABLE link_costs; "
           "PRAGMA user_version = 4; COMMIT;");
  ASSERT_NE(raw_exec(db_path(), "INSERT INTO op_shapes (kind, dims, flops, bytes_in, bytes_out) "
                                "VALUES ('gelu', '8', 1, 1, 1)"),
            0)
      << "a version 4 file refuses the new kinds";
  Database db = Database::open(db_path());
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM run_ops JOIN op_shapes s ON s.id = run_ops.shape_id"), "2");
  EXPECT_EQ(raw_query(db_path(), "PRAGMA foreign_key_check"), "");
  RunWriter run(db, sim_board(), "sim", 2);
  profiler::OpShape gelu;
  gelu.kind = profiler::OpKind::kGelu;
  gelu.dims[0] = 4096;
  gelu.dim_count = 1;
  gelu.flops = 8 * 4096;
  EXPECT_NO_THROW(run.add_op(1, gelu, profiler::Phase::kForward));
  db.commit_batch();
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM op_shapes WHERE kind = 'gelu'"), "1");
}

}  // namespace
}  // namespace ergon::costdb
