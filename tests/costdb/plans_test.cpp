// Plans stored by sweeps: written, found again for resuming, listed for fronts, and kept
// across the schema migration that added their columns.

#include "costdb/plans.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "costdb_test_util.h"

namespace ergon::costdb {
namespace {

using testing::raw_exec;
using testing::raw_query;
using testing::sim_board;

class PlansTest : public testing::TempDirTest {};

PlanRow plan(const std::string& planner, uint64_t budget, std::optional<double> deadline) {
  PlanRow p;
  p.model = "mlp batch 1";
  p.board_kind = "pi4";
  p.cost_source = PlanCostSource::kProfile;
  p.graph_digest = "abc123";
  p.budget_bytes = budget;
  p.deadline_s = deadline;
  p.planner = planner;
  p.status = "optimal";
  p.objective_j = 1.5;
  p.bound_j = 1.49;
  p.gap = 0.0066;
  p.energy_j = 1.5;
  p.time_s = 2.0;
  p.paging_time_s = 0.1;
  p.peak_bytes = budget - 1;
  p.solve_time_s = 0.25;
  p.schedule = {'E', 'S', 1, 2, 0};
  p.created_at_ns = 42;
  return p;
}

TEST_F(PlansTest, AStoredPlanIsFoundByItsRequestAndReadBackWhole) {
  Database db = Database::open(db_path());
  const int64_t id = add_plan(db, plan("poet", 1000, std::nullopt));
  add_plan(db, plan("poet", 1000, 3.0));
  add_plan(db, plan("chen", 1000, std::nullopt));
  db.commit_batch();

  const auto found = find_plan(db, "abc123", "poet", "poet", 1000, std::nullopt);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->board_kind, "pi4");
  EXPECT_EQ(found->schedule, plan("poet", 1000, std::nullopt).schedule);
  EXPECT_EQ(found->peak_bytes, 999U);
  EXPECT_DOUBLE_EQ(*found->gap, 0.0066);
  EXPECT_FALSE(found->deadline_s);

  const auto with_deadline = find_plan(db, "abc123", "poet", "poet", 1000, 3.0);
  ASSERT_TRUE(with_deadline);
  EXPECT_DOUBLE_EQ(*with_deadline->deadline_s, 3.0);
  EXPECT_FALSE(find_plan(db, "abc123", "poet", "poet", 999, std::nullopt));
  EXPECT_FALSE(find_plan(db, "other", "poet", "poet", 1000, std::nullopt));
  EXPECT_FALSE(find_plan(db, "abc123", "poet", "total", 1000, std::nullopt));
}

TEST_F(PlansTest, ListingGroupsByPlannerAndBudget) {
  Database db = Database::open(db_path());
  add_plan(db, plan("poet", 3000, std::nullopt));
  add_plan(db, plan("chen", 2000, std::nullopt));
  add_plan(db, plan("poet", 1000, std::nullopt));
  auto other = plan("poet", 500, std::nullopt);
  other.graph_digest = "zzz";
  add_plan(db, other);
  const auto rows = list_plans(db, "abc123");
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(rows[0].planner, "chen");
  EXPECT_EQ(rows[1].budget_bytes, 1000U);
  EXPECT_EQ(rows[2].budget_bytes, 3000U);
  EXPECT_EQ(list_plans(db).size(), 4U);
}

TEST_F(PlansTest, PlansWithoutAScheduleKeepTheirStatus) {
  Database db = Database::open(db_path());
  auto p = plan("rotor", 10, std::nullopt);
  p.status = "infeasible";
  p.schedule.clear();
  p.objective_j.reset();
  p.energy_j.reset();
  p.peak_bytes.reset();
  add_plan(db, p);
  const auto found = find_plan(db, "abc123", "rotor", "poet", 10, std::nullopt);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->status, "infeasible");
  EXPECT_TRUE(found->schedule.empty());
  EXPECT_FALSE(found->energy_j);
}

TEST_F(PlansTest, AnUpdatedAnswerReplacesTheScheduleAndClaimsButKeepsTheRequest) {
  Database db = Database::open(db_path());
  PlanRow row = plan("poet", 1000, std::nullopt);
  row.id = add_plan(db, row);
  row.energy_j = 1.2;
  row.objective_j = 1.2;
  row.gap = 0.0;
  row.status = "optimal";
  row.schedule = {'E', 'S', 1, 3, 0};
  update_plan_answer(db, row);
  db.commit_batch();
  const auto found = find_plan(db, "abc123", "poet", "poet", 1000, std::nullopt);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, row.id);
  EXPECT_DOUBLE_EQ(*found->energy_j, 1.2);
  EXPECT_EQ(found->status, "optimal");
  EXPECT_EQ(found->schedule, row.schedule);
  EXPECT_EQ(found->budget_bytes, 1000U);
  row.id = 999;
  EXPECT_THROW(update_plan_answer(db, row), ergon::DatabaseError);
}

TEST_F(PlansTest, AVersionOneFileIsMigratedAndKeepsItsRuns) {
  {
    Database db = Database::open(db_path());
    RunWriter run(db, sim_board(), "sim", 1);
  }
  // Turn the file back into schema version 1: drop what versions 2 to 7 added (v5 only widened a CHECK).
  raw_exec(db_path(),
           "DROP TRIGGER runs_delete_power_run; ALTER TABLE runs DROP COLUMN power_run_id; "
           "ALTER TABLE runs DROP COLUMN device_time_scale; ALTER TABLE runs DROP COLUMN plan; ALTER TABLE runs DROP COLUMN link; DROP TABLE link_costs; "
           "DROP TABLE run_attributions; DROP INDEX plans_key; ALTER TABLE plans DROP COLUMN objective; "
           "ALTER TABLE plans DROP COLUMN graph_digest; ALTER TABLE plans DROP COLUMN gap; "
           "ALTER TABLE plans DROP COLUMN energy_j; ALTER TABLE plans DROP COLUMN time_s; "
           "ALTER TABLE plans DROP COLUMN paging_time_s; "
           "ALTER TABLE plans DROP COLUMN peak_bytes; ALTER TABLE plans DROP COLUMN power_mode; "
           "ALTER TABLE plans DROP COLUMN cost_source; ALTER TABLE plans DROP COLUMN costs_timed_in; "
           "PRAGMA user_version = 1;");
  ASSERT_EQ(raw_query(db_path(), "PRAGMA user_version"), "1");
  // Reading refuses it and says how to upgrade; nothing is written until then.
  try {
    (void)Database::open_read_only(db_path());
    ADD_FAILURE() << "an old file must not be read as a new one";
  } catch (const ergon::DatabaseError& e) {
    EXPECT_NE(std::string(e.what()).find("upgrade it once with ergon upgrade --db"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Database::file_schema_version(db_path()), 1);
  Database db = Database::open(db_path());
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM runs"), "1");
  add_plan(db, plan("poet", 1000, std::nullopt));
  EXPECT_TRUE(find_plan(db, "abc123", "poet", "poet", 1000, std::nullopt));
}

TEST_F(PlansTest, APlanOnCostsTimedInIterationsSaysSoWhenReadBack) {
  Database db = Database::open(db_path());
  PlanRow in_iterations = plan("poet", 1000, std::nullopt);
  in_iterations.cost_source = PlanCostSource::kMeasured;
  in_iterations.costs_from_iterations = true;
  const int64_t id = add_plan(db, in_iterations);
  const int64_t profile_id = add_plan(db, plan("chen", 1000, std::nullopt));
  db.commit_batch();
  EXPECT_TRUE(find_plan_by_id(db, id)->costs_from_iterations);
  EXPECT_FALSE(find_plan_by_id(db, profile_id)->costs_from_iterations);
  EXPECT_EQ(raw_query(db_path(), "SELECT group_concat(costs_timed_in) FROM plans ORDER BY id"), "iteration,profile");
}

TEST_F(PlansTest, AVersionSixPlanMadeOnMeasuredCostsStillSaysSoAfterTheUpgrade) {
  {
    Database db = Database::open(db_path());
    PlanRow measured = plan("poet", 1000, std::nullopt);
    measured.cost_source = PlanCostSource::kMeasured;
    add_plan(db, measured);
    add_plan(db, plan("chen", 1000, std::nullopt));
    db.commit_batch();
  }
  // Version 6 kept the cost source as the name of the boards row a plan hung off.
  raw_exec(db_path(),
           "INSERT INTO boards (kind, name, tick_hz, ram_bytes, first_seen_ns) VALUES "
           "('pi4', 'measured', 0, 0, 0), ('pi4', 'profile', 0, 0, 0); "
           "UPDATE plans SET board_id = (SELECT id FROM boards WHERE name = "
           "CASE plans.cost_source WHEN 'measured' THEN 'measured' ELSE 'profile' END); "
           "ALTER TABLE plans DROP COLUMN cost_source; ALTER TABLE plans DROP COLUMN costs_timed_in; ALTER TABLE runs DROP COLUMN device_time_scale; ALTER TABLE runs DROP COLUMN plan; ALTER TABLE runs DROP COLUMN link; DROP TABLE link_costs; "
           "PRAGMA user_version = 6;");
  Database db = Database::open(db_path());
  ASSERT_EQ(db.schema_version(), kSchemaVersion);
  const auto poet = find_plan(db, "abc123", "poet", "poet", 1000, std::nullopt);
  const auto chen = find_plan(db, "abc123", "chen", "poet", 1000, std::nullopt);
  ASSERT_TRUE(poet && chen);
  EXPECT_EQ(poet->cost_source, PlanCostSource::kMeasured);
  EXPECT_EQ(chen->cost_source, PlanCostSource::kProfile);
  EXPECT_EQ(poet->board_kind, "pi4");
}

}  // namespace
}  // namespace ergon::costdb
