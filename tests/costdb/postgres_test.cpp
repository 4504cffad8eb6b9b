// The PostgreSQL backend against a real server the test starts (tests/support/postgres_server.h):
// the same writes read back the same as from an SQLite file, and what a shared database adds
// (versions in a table, roles, a server that goes away).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/error.h"
#include "costdb/cost_model.h"
#include "costdb/copy.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "costdb/database_impl.h"
#include "costdb/plans.h"
#include "tests/costdb/costdb_test_util.h"
#include "tests/support/postgres_server.h"

namespace ergon::costdb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::make_samples;
using testing::read_file;
using testing::sim_board;
using ergon::testing::PostgresServer;

TEST(PostgresLocator, NamesAPostgresDatabaseOnlyByUriOrLibpqKeywords) {
  EXPECT_TRUE(is_postgres_locator("postgresql://lab@db.lab/ergon"));
  EXPECT_TRUE(is_postgres_locator("postgres://lab@db.lab/ergon"));
  EXPECT_TRUE(is_postgres_locator("service=ergonlab"));
  EXPECT_TRUE(is_postgres_locator("host=/run/postgresql dbname=ergon"));
  EXPECT_FALSE(is_postgres_locator("lab.db"));
  EXPECT_FALSE(is_postgres_locator("runs/size=4.db"));  // a file whose name has an '='
  EXPECT_FALSE(is_postgres_locator("/data/postgresql/ergon.db"));
  EXPECT_FALSE(is_postgres_locator(""));
}

TEST(PostgresLocator, MessagesNeverShowThePassword) {
  EXPECT_EQ(detail::postgres_display_locator("postgresql://lab:s3cret@db.lab:5433/ergon"),
            "postgresql://lab@db.lab:5433/ergon");
  EXPECT_EQ(detail::postgres_display_locator("host=db.lab password=s3cret dbname=ergon"),
            "host=db.lab dbname=ergon");
  EXPECT_EQ(detail::postgres_display_locator("postgresql:///ergon?host=/tmp&password=s3cret"),
            "postgresql:///ergon?host=/tmp&");
}

TEST(PostgresParameters, SqliteParametersBecomeNumberedOnesOutsideQuotesAndComments) {
  EXPECT_EQ(detail::postgres_parameters("SELECT ?1, ?12 WHERE a = '?' AND \"b?\" = ?2"),
            "SELECT $1, $12 WHERE a = '?' AND \"b?\" = $2");
  EXPECT_EQ(detail::postgres_parameters("VALUES (?1,?,?),(?1,?,?) -- what?\n"),
            "VALUES ($1,$2,$3),($1,$4,$5) -- what?\n");
  EXPECT_EQ(detail::postgres_parameters("SELECT 'it''s ?' /* ? */, ?"), "SELECT 'it''s ?' /* ? */, $1");
}

TEST(PostgresText, NumbersReadBackAsSqliteWouldGiveThem) {
  for (double v : {0.1, 1e-300, -2.5e17, 123456789.123456789, std::numeric_limits<double>::max()})
    EXPECT_EQ(detail::parse_postgres_double(detail::postgres_double_text(v)), v);
  EXPECT_TRUE(std::isinf(detail::parse_postgres_double(detail::postgres_double_text(HUGE_VAL))));
  EXPECT_EQ(detail::parse_postgres_int64("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(detail::parse_postgres_int64("12.75"), 12);
  EXPECT_EQ(detail::parse_postgres_int64("t"), 1);
  EXPECT_EQ(detail::parse_postgres_bytea("\\x00ff45"), (std::vector<uint8_t>{0x00, 0xff, 0x45}));
}

class PostgresTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    auto& server = PostgresServer::shared();
    // The suite runs in scripts/test.sh, which installs PostgreSQL: no server is a failure.
    ASSERT_TRUE(server.available()) << "PostgreSQL: " << server.why_not();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    db_name_ = "t_" + std::string(info->name());
    for (char& c : db_name_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    db_name_ = db_name_.substr(0, 60);
    locator_ = server.create_database(db_name_);
  }

  std::string db_name_;
  std::string locator_;
};

/// Everything costdb writes, once: a board run with ops, spans, samples (enough for several
/// COPYs), sync points and events; its power logger; an attribution with costs; a plan and a
/// validation. Returns the board run's id.
int64_t write_everything(Database& db, std::size_t sample_count) {
  const auto conv = profiler::conv2d(1, 3, 16, 32, 32, 3, profiler::Phase::kForward);
  const auto relu = profiler::relu(16 * 32 * 32, profiler::Phase::kForward);
  BoardInfo board = sim_board();
  board.power_mode = "MAXN";
  board.mode_switch_ns = 1'250'000;
  RunWriter run(db, board, "serial:/dev/ttyACM0", 1'000'000'000, RunPlan::kProfile);
  run.add_op(0, conv, profiler::Phase::kForward);
  run.add_op(1, relu, profiler::Phase::kForward);
  run.add_span({0, profiler::Phase::kForward, 100, 200, 4});
  run.add_span({1, profiler::Phase::kForward, 200, 250, 1});
  run.add_span({0, profiler::Phase::kBackward, 250, 400, 1});
  const auto samples = make_samples(sample_count);
  std::span<const probes::PowerSample> rest(samples);
  while (!rest.empty()) {
    const std::size_t piece = std::min<std::size_t>(rest.size(), 4099);
    run.add_samples(rest.first(piece));
    rest = rest.subspan(piece);
  }
  run.add_sync({1, 10, 1000, 1001, 30});
  run.add_sync({2, 1'000'010, 2000, 2001, 1'000'040});
  run.add_event(5, "log", "hello, \"world\" ?1 'quoted'");
  LinkCounters counters;
  counters.bytes = 1ULL << 40;
  counters.frames_ok = 999;
  counters.device_samples_sent = sample_count;
  run.update(RunStatus::kCompleted, counters, 2'000'000'000);

  BoardInfo logger;
  logger.kind = "ppk2";
  logger.name = "ppk2-1";
  logger.tick_hz = 100'000;
  logger.rails = {{0, "VOUT"}};
  RunWriter logger_run(db, logger, "ppk2:/dev/ttyACM1", 1'000'000'100);
  logger_run.add_samples(make_samples(10));
  logger_run.update(RunStatus::kStopped, {}, 2'000'000'100);
  set_power_run(db, run.run_id(), logger_run.run_id());

  RunAttributionRow attribution;
  attribution.clock_fitted = true;
  attribution.clock_drift_ppm = -12.5;
  attribution.clock_residual_rms_ns = 1234.5;
  attribution.clock_note = "fit on 2 of 2 points";
  attribution.sample_period_s = 1e-4;
  attribution.idle_power_w = 2.7;
  attribution.windows = 3;
  OpCostRow cost;
  cost.op_id = 0;
  cost.time_s = 2.5e-5;
  cost.time_s_stddev = 1e-7;
  cost.gross_energy_j = 1e-4;
  cost.net_energy_j = 4e-5;
  cost.sample_count = 12;
  OpCostRow time_only = cost;
  time_only.op_id = 1;
  time_only.gross_energy_j.reset();
  time_only.net_energy_j.reset();
  time_only.energy_j_stddev.reset();
  const std::vector<OpCostRow> costs{cost, time_only};
  replace_attribution(db, run.run_id(), attribution, costs);
  attribution.windows_uncovered = 1;  // attributing again replaces the row
  replace_attribution(db, run.run_id(), attribution, costs);

  PlanRow plan;
  plan.model = "resnet18-cifar batch 1";
  plan.board_kind = "pi4";
  plan.graph_digest = "abc123";
  plan.budget_bytes = 64ULL << 20;
  plan.deadline_s = 1.5;
  plan.planner = "poet";
  plan.status = "optimal";
  plan.objective_j = 12.25;
  plan.peak_bytes = 60ULL << 20;
  plan.schedule = {'E', 'S', 0, 1, 0xff, 0x00, 0x7f};
  plan.created_at_ns = 3'000'000'000;
  plan.power_mode = "MAXN";
  plan.id = add_plan(db, plan);
  plan.status = "feasible";
  plan.gap = 0.01;
  update_plan_answer(db, plan);
  ValidationRow validation;
  validation.plan_id = plan.id;
  validation.run_id = run.run_id();
  validation.predicted_energy_j = 12.25;
  validation.measured_peak_bytes = 61ULL << 20;
  add_validation(db, validation);
  db.commit_batch();
  return run.run_id();
}

TEST_F(PostgresTest, TheSameWritesReadBackTheSameAsFromAnSqliteFile) {
  constexpr std::size_t kSamples = 150'000;  // about three COPYs
  Database lite = Database::open(db_path());
  Database pg = Database::open(locator_);
  EXPECT_TRUE(pg.is_postgres());
  EXPECT_FALSE(lite.is_postgres());
  const int64_t lite_run = write_everything(lite, kSamples);
  const int64_t pg_run = write_everything(pg, kSamples);
  ASSERT_EQ(lite_run, pg_run);  // ids start at 1 on both

  const auto lite_runs = list_runs(lite);
  const auto pg_runs = list_runs(pg);
  ASSERT_EQ(pg_runs.size(), 2U);
  ASSERT_EQ(lite_runs.size(), pg_runs.size());
  for (std::size_t i = 0; i < pg_runs.size(); ++i) {
    const RunSummary& a = lite_runs[i];
    const RunSummary& b = pg_runs[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.board_kind, b.board_kind);
    EXPECT_EQ(a.board_name, b.board_name);
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.started_at_ns, b.started_at_ns);
    EXPECT_EQ(a.ended_at_ns, b.ended_at_ns);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.spans, b.spans);
    EXPECT_EQ(a.samples, b.samples);
    EXPECT_EQ(a.sync_points, b.sync_points);
    EXPECT_EQ(a.counters.bytes, b.counters.bytes);
    EXPECT_EQ(a.counters.device_samples_sent, b.counters.device_samples_sent);
    EXPECT_EQ(a.power_run_id, b.power_run_id);
    EXPECT_EQ(a.power_mode, b.power_mode);
    EXPECT_EQ(a.plan, b.plan);
  }
  EXPECT_EQ(pg_runs[0].samples, kSamples);
  EXPECT_EQ(pg_runs[0].counters.bytes, 1ULL << 40);

  // Every raw row, in arrival order: the CSV exports are the same bytes.
  export_run_csv(lite, lite_run, dir_ / "lite");
  export_run_csv(pg, pg_run, dir_ / "pg");
  for (const char* file : {"spans.csv", "samples.csv", "sync.csv", "events.csv", "ops.csv"})
    EXPECT_EQ(read_file(dir_ / "pg" / file), read_file(dir_ / "lite" / file)) << file;

  const RunData a = load_run_data(lite, lite_run);
  const RunData b = load_run_data(pg, pg_run);
  EXPECT_EQ(a.tick_hz, b.tick_hz);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    ASSERT_EQ(a.samples[i].t_ticks, b.samples[i].t_ticks) << i;
    ASSERT_EQ(a.samples[i].rail, b.samples[i].rail) << i;
    ASSERT_EQ(a.samples[i].power_uw, b.samples[i].power_uw) << i;
    ASSERT_EQ(a.samples[i].flags, b.samples[i].flags) << i;
  }

  const auto lite_attr = find_attribution(lite, lite_run);
  const auto pg_attr = find_attribution(pg, pg_run);
  ASSERT_TRUE(pg_attr);
  EXPECT_EQ(pg_attr->clock_drift_ppm, lite_attr->clock_drift_ppm);
  EXPECT_EQ(pg_attr->clock_note, lite_attr->clock_note);
  EXPECT_EQ(pg_attr->windows_uncovered, 1U);

  const auto lite_costs = list_op_costs(lite, std::string("pi4"), std::nullopt);
  const auto pg_costs = list_op_costs(pg, std::string("pi4"), std::nullopt);
  ASSERT_EQ(pg_costs.size(), 2U);
  for (std::size_t i = 0; i < pg_costs.size(); ++i) {
    EXPECT_EQ(pg_costs[i].time_s, lite_costs[i].time_s);
    EXPECT_EQ(pg_costs[i].net_energy_j, lite_costs[i].net_energy_j);
    EXPECT_EQ(pg_costs[i].dims, lite_costs[i].dims);
    EXPECT_EQ(pg_costs[i].power_mode, "MAXN");
  }
  EXPECT_FALSE(pg_costs[1].net_energy_j);  // a time-only cost stays without energy
  EXPECT_EQ(measured_mode_switch_s(pg, "pi4"), measured_mode_switch_s(lite, "pi4"));
  EXPECT_DOUBLE_EQ(*measured_mode_switch_s(pg, "pi4"), 1.25e-3);

  const auto pg_plans = list_plans(pg);
  const auto lite_plans = list_plans(lite);
  ASSERT_EQ(pg_plans.size(), 1U);
  EXPECT_EQ(pg_plans[0].schedule, lite_plans[0].schedule);
  EXPECT_EQ(pg_plans[0].status, "feasible");
  EXPECT_EQ(pg_plans[0].gap, lite_plans[0].gap);
  EXPECT_EQ(pg_plans[0].deadline_s, 1.5);
  const auto found = find_plan(pg, "abc123", "poet", "poet", 64ULL << 20, 1.5);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, pg_plans[0].id);
  EXPECT_FALSE(find_plan(pg, "abc123", "poet", "poet", 64ULL << 20, std::nullopt));
  const auto validations = list_validations(pg);
  ASSERT_EQ(validations.size(), 1U);
  EXPECT_EQ(validations[0].measured_peak_bytes, 61ULL << 20);
  EXPECT_EQ(list_events(pg, pg_run)[0].text, "hello, \"world\" ?1 'quoted'");
  EXPECT_EQ(list_rails(pg, pg_run).size(), 2U);
}

TEST_F(PostgresTest, TheSchemaVersionIsKeptInATableAndANewerOneIsRefused) {
  { Database db = Database::open(locator_); EXPECT_EQ(db.schema_version(), kSchemaVersion); }
  auto& server = PostgresServer::shared();
  // One row per migration applied, from the first PostgreSQL schema (version 10) on.
  std::string applied;
  for (int v = 10; v <= kSchemaVersion; ++v) applied += (applied.empty() ? "" : ",") + std::to_string(v);
  EXPECT_EQ(server.query("SELECT string_agg(version::text, ',' ORDER BY version) FROM ergon_schema_versions", db_name_),
            applied);
  EXPECT_EQ(Database::file_schema_version(locator_), kSchemaVersion);
  // Opening again migrates nothing.
  { Database db = Database::open(locator_); }
  EXPECT_EQ(server.query("SELECT count(*) FROM ergon_schema_versions", db_name_),
            std::to_string(kSchemaVersion - 10 + 1));

  ASSERT_EQ(server.admin("INSERT INTO ergon_schema_versions (version) VALUES (99)", db_name_), "");
  try {
    Database::open(locator_);
    FAIL() << "a newer schema must be refused";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("schema version 99, newer than this ergon"));
  }
}

TEST_F(PostgresTest, ADatabaseWithOtherTablesIsNotTakenOver) {
  auto& server = PostgresServer::shared();
  ASSERT_EQ(server.admin("CREATE TABLE invoices (id int)", db_name_), "");
  try {
    Database::open(locator_);
    FAIL() << "a foreign database must be refused";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not an ergon database"));
  }
  EXPECT_EQ(server.query("SELECT to_regclass('runs')::text", db_name_), "");
}

TEST_F(PostgresTest, AReadOnlyRoleCanReadAndPlanButNotWrite) {
  { Database db = Database::open(locator_); write_everything(db, 100); }
  auto& server = PostgresServer::shared();
  server.admin("DROP ROLE IF EXISTS viewer_" + db_name_.substr(0, 20));
  const std::string role = "viewer_" + db_name_.substr(0, 20);
  ASSERT_EQ(server.admin("CREATE ROLE " + role + " LOGIN"), "");
  ASSERT_EQ(server.admin("GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role, db_name_), "");
  const std::string viewer = server.locator(db_name_, role);

  Database db = Database::open_read_only(viewer);
  EXPECT_EQ(list_runs(db).size(), 2U);
  EXPECT_EQ(list_plans(db).size(), 1U);
  EXPECT_EQ(load_run_data(db, 1).samples.size(), 100U);

  Database writer = Database::open(viewer);  // up to date: nothing to migrate
  try {
    RunWriter run(writer, sim_board(), "serial:x", 5);
    FAIL() << "a read-only role must not write";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("permission denied"));
    EXPECT_THAT(e.what(), Not(HasSubstr("\n")));
  }
}

TEST_F(PostgresTest, AnUnreachableServerIsOneLineNamingTheDatabaseWithoutItsPassword) {
  const std::string missing = "postgresql://ergon:s3cret@/nowhere?host=" + (dir_ / "no-socket").string();
  try {
    Database::open(missing);
    FAIL() << "no server there";
  } catch (const DatabaseError& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("cannot connect to database postgresql://ergon@/nowhere"));
    EXPECT_THAT(what, Not(HasSubstr("s3cret")));
    EXPECT_THAT(what, Not(HasSubstr("\n")));
  }
}

TEST_F(PostgresTest, AConnectionCutMidBatchLosesOnlyThatBatchAndSaysSo) {
  Database db = Database::open(locator_);
  RunWriter run(db, sim_board(), "serial:x", 1);
  run.add_samples(make_samples(1000));
  db.commit_batch();
  run.add_samples(make_samples(500, 1'000'000));
  {
    Database reader = Database::open_read_only(locator_);
    EXPECT_EQ(list_runs(reader).at(0).status, RunStatus::kRecording);  // its recorder is alive
  }
  auto& server = PostgresServer::shared();
  ASSERT_EQ(server.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = '" + db_name_ + "' AND application_name = 'ergon'"),
            "");
  try {
    db.commit_batch();
    FAIL() << "the connection is gone";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("lost the connection to the server"));
  }
  EXPECT_EQ(server.query("SELECT count(*) FROM power_samples", db_name_), "1000");
  EXPECT_EQ(server.query("SELECT status FROM runs", db_name_), "recording");
  // Its recorder's session is gone: the run reads back as interrupted, not as still recording.
  Database reader = Database::open_read_only(locator_);
  EXPECT_EQ(list_runs(reader).at(0).status, RunStatus::kInterrupted);
  EXPECT_EQ(find_run(reader, 1)->status, RunStatus::kInterrupted);
}

TEST_F(PostgresTest, CopyingAFileIntoTheLabDatabaseTwiceCopiesEverythingOnce) {
  {
    Database file = Database::open(db_path());
    write_everything(file, 70'000);
  }
  Database file = Database::open_read_only(db_path());
  Database lab = Database::open(locator_);
  const CopyCounts first = copy_database(file, lab);
  EXPECT_EQ(first.runs_copied, 2);
  EXPECT_EQ(first.runs_present, 0);
  EXPECT_EQ(first.samples, 70'010U);
  EXPECT_EQ(first.spans, 3U);
  EXPECT_EQ(first.plans_copied, 1);
  EXPECT_EQ(first.validations_copied, 1);

  const CopyCounts again = copy_database(file, lab);
  EXPECT_EQ(again.runs_copied, 0);
  EXPECT_EQ(again.runs_present, 2);
  EXPECT_EQ(again.plans_copied, 0);
  EXPECT_EQ(again.plans_present, 1);
  EXPECT_EQ(again.validations_copied, 0);
  auto& server = PostgresServer::shared();
  EXPECT_EQ(server.query("SELECT count(*) FROM power_samples", db_name_), "70010");
  EXPECT_EQ(server.query("SELECT count(*) FROM runs", db_name_), "2");
  EXPECT_EQ(server.query("SELECT count(*) FROM validations", db_name_), "1");

  // What arrived is what the file holds, row for row, and the board's run keeps its logger.
  const auto runs = list_runs(lab);
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[0].power_run_id, runs[1].id);
  EXPECT_EQ(runs[0].status, RunStatus::kCompleted);
  export_run_csv(file, 1, dir_ / "file");
  export_run_csv(lab, runs[0].id, dir_ / "lab");
  for (const char* f : {"spans.csv", "samples.csv", "sync.csv", "events.csv", "ops.csv"})
    EXPECT_EQ(read_file(dir_ / "lab" / f), read_file(dir_ / "file" / f)) << f;
  EXPECT_EQ(list_op_costs(lab, std::nullopt, runs[0].id).size(), 2U);
  EXPECT_EQ(find_attribution(lab, runs[0].id)->windows_uncovered, 1U);
  EXPECT_DOUBLE_EQ(*measured_mode_switch_s(lab, "pi4"), 1.25e-3);

  // And back again, into a fresh file: the same rows.
  Database back = Database::open(dir_ / "back.db");
  EXPECT_EQ(copy_database(lab, back).runs_copied, 2);
  export_run_csv(back, 1, dir_ / "back");
  EXPECT_EQ(read_file(dir_ / "back" / "samples.csv"), read_file(dir_ / "file" / "samples.csv"));
  EXPECT_EQ(list_plans(back).at(0).schedule, list_plans(file).at(0).schedule);
}

}  // namespace
}  // namespace ergon::costdb
