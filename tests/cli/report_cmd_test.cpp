#include "cli/report_cmd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "costdb/database.h"
#include "costdb/plans.h"

namespace ergon::cli {
namespace {

namespace fs = std::filesystem;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ergon-report-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto db = costdb::Database::open(db_path());
    // 10 s at 2 W, sampled every millisecond, with a 5 W spike of one sample.
    costdb::BoardInfo board{.name = "pi4-test", .kind = "pi4", .tick_hz = 1'000'000, .rails = {{0, "5V"}}};
    costdb::RunWriter run(db, board, "test", 1);
    std::vector<probes::PowerSample> samples;
    for (uint64_t i = 0; i <= 10'000; ++i)
      samples.push_back({.rail = 0, .t_ticks = i * 1000, .bus_uv = 5'000'000, .current_ua = 400'000,
                         .power_uw = i == 5000 ? 5'000'000 : 2'000'000, .flags = 0});
    run.add_samples(samples);
    run_id_ = run.run_id();
    costdb::PlanRow plan;
    plan.model = "mlp";
    plan.board_kind = "pi4";
    plan.cost_source = costdb::PlanCostSource::kProfile;
    plan.planner = "poet";
    plan.status = "optimal";
    plan.budget_bytes = 1000;
    plan.energy_j = 0.5;
    plan.time_s = 0.2;
    plan_id_ = costdb::add_plan(db, plan);
    db.commit_batch();
  }
  void TearDown() override { fs::remove_all(dir_); }
  [[nodiscard]] std::string db_path() const { return (dir_ / "lab.db").string(); }
  fs::path dir_;
  int64_t run_id_ = 0, plan_id_ = 0;
};

TEST_F(ReportTest, ARunsEnergyIsItsPowerIntegratedAndEmissionsFollowPueAndGrid) {
  app::ReportRequest args;
  args.db = db_path();
  args.run = run_id_;
  args.pue = 1.5;
  args.grid_gco2_per_kwh = 300;
  const app::EnergyStatement s = app::energy_statement(args);
  EXPECT_TRUE(s.measured);
  EXPECT_NEAR(s.energy_j, 20.0 + 0.003, 1e-9);  // the spike adds (5 - 2) W over 1 ms
  EXPECT_NEAR(s.time_s, 10.0, 1e-12);
  EXPECT_NEAR(s.average_power_w, 2.0003, 1e-9);
  EXPECT_DOUBLE_EQ(*s.peak_power_w, 5.0);
  EXPECT_NEAR(s.energy_kwh, s.energy_j / 3.6e6, 1e-18);
  EXPECT_NEAR(s.facility_kwh, 1.5 * s.energy_kwh, 1e-18);
  EXPECT_NEAR(*s.gco2, 300 * s.facility_kwh, 1e-15);
  std::ostringstream md;
  EXPECT_EQ(run_report(args, /*json=*/false, md), 0);
  EXPECT_NE(md.str().find("| emissions (300 gCO2e/kWh) |"), std::string::npos) << md.str();
}

TEST_F(ReportTest, APlansEnergyIsPerIterationTimesTheIterations) {
  app::ReportRequest args;
  args.db = db_path();
  args.plan = plan_id_;
  args.iterations = 1000;
  const app::EnergyStatement s = app::energy_statement(args);
  EXPECT_FALSE(s.measured);
  EXPECT_DOUBLE_EQ(s.energy_j, 500.0);
  EXPECT_DOUBLE_EQ(s.time_s, 200.0);
  EXPECT_FALSE(s.gco2) << "no grid intensity given";
}

TEST_F(ReportTest, APueProfileGivesAWhatIfPerPeriod) {
  const fs::path profile = dir_ / "pue.csv";
  std::ofstream(profile) << "period,pue,gco2_per_kwh\n03:00,1.1,200\n# comment\n15:00,1.4\n";
  app::ReportRequest args;
  args.db = db_path();
  args.plan = plan_id_;
  args.grid_gco2_per_kwh = 500;
  args.pue_profile = profile.string();
  const app::EnergyStatement s = app::energy_statement(args);
  ASSERT_EQ(s.what_ifs.size(), 2U);
  EXPECT_EQ(s.what_ifs[0].period, "03:00");
  EXPECT_NEAR(*s.what_ifs[0].gco2, 0.5 / 3.6e6 * 1.1 * 200, 1e-15);
  EXPECT_NEAR(*s.what_ifs[1].gco2, 0.5 / 3.6e6 * 1.4 * 500, 1e-15) << "the grid's intensity where the row has none";
  EXPECT_EQ(s.profile_note,
            profile.string() + ": 2 rows read; skipped 1 comment lines, 0 blank lines, 1 header lines");
  std::ostringstream json;
  run_report(args, /*json=*/true, json);
  EXPECT_NE(json.str().find("\"what_if\""), std::string::npos);
}

TEST_F(ReportTest, BadInputIsRefusedNamingWhatIsWrong) {
  app::ReportRequest args;
  args.db = db_path();
  EXPECT_THROW(app::energy_statement(args), InputError) << "neither run nor plan";
  args.run = 999;
  EXPECT_THROW(app::energy_statement(args), InputError);
  args.run = run_id_;
  args.pue = 0.8;
  EXPECT_THROW(app::energy_statement(args), InputError);
  args.pue = 1.2;
  const fs::path bad = dir_ / "bad.csv";
  std::ofstream(dir_ / "trailing.csv") << "03:00,1.2,380abc\n";
  args.pue_profile = (dir_ / "trailing.csv").string();
  EXPECT_THROW(app::energy_statement(args), InputError) << "a grid intensity with trailing text";
  std::ofstream(bad) << "03:00,abc\n";
  args.pue_profile = bad.string();
  try {
    app::energy_statement(args);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ergon::cli
