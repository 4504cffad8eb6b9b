// A board without a power chip still gives time costs: ergon-agent with no probe (this very
// machine, a Linux host), recorded over a real pty, attributed, planned and validated on real
// kernels. Energy stays unknown all the way: never 0, never guessed.

#include <algorithm>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "agent/agent.h"
#include "app/attribute.h"
#include "app/board_costs.h"
#include "app/plan.h"
#include "app/record.h"
#include "app/step_plans.h"
#include "app/validate.h"
#include "common/error.h"
#include "costdb/costs.h"
#include "costdb/plans.h"
#include "devices/board_profile.h"
#include "planner/zoo.h"
#include "tests/support/recording_test.h"

namespace ergon {
namespace {

class TimeOnlyProfiling : public testing::RecordingTest {
 protected:
  /// ergon-agent on a pty with no probe, as board `board` (empty: this Linux host).
  agent::AgentOptions agent_without_probe(const std::string& board = "") const {
    agent::AgentOptions options;
    options.link = "pty";
    options.probe = std::string(agent::kNoProbe);
    options.board = board;
    options.scratch = dir_;
    return options;
  }

  /// Records mlp's own profile plan from an agent with no probe and attributes it; returns
  /// the run.
  int64_t record_without_probe(const std::string& board) {
    agent::AgentThread agent(agent_without_probe(board));
    app::RecordRequest req;
    req.ports = {agent.link()};
    req.db_path = db_path();
    const auto graph = planner::build_training_graph(planner::zoo_model("mlp", 1), app::BoardProfileCosts(*devices::find_board("pi4")));
    req.options.plan = app::model_profile_plan(graph, 1);
    std::atomic<int> interrupts{0};
    const auto outcomes = app::record_boards(req, {}, interrupts);
    EXPECT_EQ(outcomes.size(), 1U);
    EXPECT_EQ(outcomes.at(0).state, devices::SessionState::kCompleted) << outcomes.at(0).error;
    auto db = costdb::Database::open(db_path());
    (void)app::attribute_run(db, *outcomes.at(0).run_id);
    return *outcomes.at(0).run_id;
  }

  /// A validation that executes mlp's plan for `board` on the agent at `port`, its objective time.
  app::ValidateRequest execute_on(const std::string& port, const std::string& board = "host") const {
    app::ValidateRequest v;
    v.plan = plan_args(board);
    v.plan.objective = "time";
    v.db = db_path().string();
    v.execute = true;
    v.port = port;
    return v;
  }

  app::PlanArgs plan_args(const std::string& board) const {
    app::PlanArgs args;
    args.model = "mlp";
    args.board = board;
    args.db = db_path().string();
    args.time_limit_s = 3;
    args.gap = 0.05;
    return args;
  }
};

TEST_F(TimeOnlyProfiling, AnAgentWithoutAProbeGivesTimeCostsWhoseEnergyIsUnknown) {
  const int64_t run = record_without_probe("");
  auto db = costdb::Database::open(db_path());
  const app::AttributedRun a = app::attribute_run(db, run);
  EXPECT_EQ(a.run.board_kind, "host");  // no --board: a Linux host, no published profile
  EXPECT_EQ(a.samples, 0U);
  ASSERT_FALSE(a.rows.empty());
  for (const costdb::OpCostRow& r : costdb::list_op_costs(db, "host", run)) {
    EXPECT_GT(r.time_s, 0) << "op " << r.op_id;
    EXPECT_FALSE(r.gross_energy_j.has_value()) << "op " << r.op_id;
    EXPECT_FALSE(r.net_energy_j.has_value()) << "op " << r.op_id;
  }
}

TEST_F(TimeOnlyProfiling, PlanningTimeOnlyCostsRefusesEnergyWithoutAPowerModelAndPlansTime) {
  record_without_probe("");
  try {
    (void)app::plan(plan_args("host"));
    ADD_FAILURE() << "energy cannot be planned on times alone";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--objective time"), std::string::npos) << e.what();
  }
  app::PlanArgs args = plan_args("host");
  args.objective = "time";
  const app::PlanOutcome o = app::plan(args);
  ASSERT_TRUE(o.result.schedule) << o.result.why;
  EXPECT_TRUE(o.time_objective);
  // What the plan minimises is the iteration's makespan, in seconds: its replay's "energy".
  EXPECT_NEAR(o.sim->total_energy_j, o.sim->makespan_s, 1e-9 + 1e-9 * o.sim->makespan_s);
  EXPECT_LE(o.sim->makespan_s, o.store_all.makespan_s * 1.5);
  EXPECT_NE(o.cost_source.find("times only"), std::string::npos) << o.cost_source;
}

TEST_F(TimeOnlyProfiling, ABoardWithAProfileTakesItsEnergyFromThePublishedPowerAndSaysSo) {
  record_without_probe("pi4");  // a Pi 4 whose INA219 is not wired yet
  const app::PlanOutcome o = app::plan(plan_args("pi4"));
  ASSERT_TRUE(o.result.schedule) << o.result.why;
  EXPECT_NE(o.cost_source.find("pi4 profile's published power"), std::string::npos) << o.cost_source;
  EXPECT_GT(o.sim->total_energy_j, 0);
  // Energy is the measured time at the profile's power: idle power over the makespan at least.
  EXPECT_GE(o.sim->total_energy_j, devices::find_board("pi4")->idle_w * o.sim->makespan_s * 0.999);
}

TEST_F(TimeOnlyProfiling, ADatabaseOfOneHostsTimesDefaultsTheBoardToItAndTheObjectiveToTime) {
  app::PlanArgs none;
  none.board.clear();
  none.objective.clear();
  app::PlanArgs args = none;
  EXPECT_TRUE(app::fill_defaults(args, db_path().string()).empty()) << "no database yet";
  EXPECT_EQ(args.board, "pi4");
  EXPECT_EQ(args.objective, "total");
  record_without_probe("");
  args = none;
  const auto chosen = app::fill_defaults(args, db_path().string());
  EXPECT_EQ(args.board, "host");
  EXPECT_EQ(args.objective, "time") << "a host without a power probe has no energy to plan";
  ASSERT_EQ(chosen.size(), 2U);
  EXPECT_NE(chosen[1].find("times only"), std::string::npos) << chosen[1];
  args = none;
  args.board = "pi4";  // named: its published profile, energy planned
  app::fill_defaults(args, db_path().string());
  EXPECT_EQ(args.objective, "total");
  record_without_probe("pi4");
  args = none;
  try {
    app::fill_defaults(args, db_path().string());
    ADD_FAILURE() << "two boards in the database: which one must be asked";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("host, pi4"), std::string::npos) << e.what();
  }
}

TEST_F(TimeOnlyProfiling, ValidatingOnRealKernelsComparesTimePerStepAndLeavesEnergyUncompared) {
  record_without_probe("");
  agent::AgentThread agent(agent_without_probe());
  app::ValidateRequest v = execute_on(agent.link());
  const app::ValidateOutcome o = app::validate(v);
  EXPECT_TRUE(o.gradients_match());
  EXPECT_EQ(o.steps_timed, o.steps);
  EXPECT_EQ(o.steps_attributed, 0);
  EXPECT_FALSE(o.predicted_energy_j.has_value());
  EXPECT_FALSE(o.measured_energy_j.has_value());
  ASSERT_EQ(o.step_times.size(), static_cast<std::size_t>(o.steps));
  for (const auto& st : o.step_times) {
    EXPECT_GT(st.predicted_s, 0);
    ASSERT_TRUE(st.measured_s.has_value());
    EXPECT_GT(*st.measured_s, 0);
  }
  EXPECT_GT(o.measured_time_s, 0);
  EXPECT_GE(o.step_error_p95, o.step_error_median);
  // Real kernels vary from one iteration to the next: five by default on a port, and the
  // measured time is their median.
  EXPECT_EQ(o.iterations, 5);
  ASSERT_EQ(o.iteration_times_s.size(), 5U);
  std::vector<double> sorted = o.iteration_times_s;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(o.measured_time_s, sorted[2]);
  // The validation's steps (five windows each) are not costs to plan on: planning again
  // finds the profile's costs alone, or it would predict with its own measurements.
  app::PlanArgs again = plan_args("host");
  again.objective = "time";
  std::string source;
  (void)app::load_graph(again, &source);
  EXPECT_NE(source.find("from 1 run(s)"), std::string::npos) << source;
  auto db = costdb::Database::open_read_only(db_path());
  EXPECT_EQ(costdb::find_run(db, o.run_id)->plan, costdb::RunPlan::kExecute);
}

TEST_F(TimeOnlyProfiling, StoreAllIsTimedRightAfterOnTheSameCostsSoTheMachinesSpeedIsShownApartFromTheSchedule) {
  record_without_probe("");
  agent::AgentThread agent(agent_without_probe());
  app::ValidateRequest v = execute_on(agent.link());
  const app::ValidateOutcome o = app::validate(v);
  ASSERT_TRUE(o.gradients_match());
  ASSERT_TRUE(o.reference_time.has_value());
  // Predicted from the same costs as the schedule: store-all's replay on the plan's graph.
  const planner::ScheduleReport all = planner::simulate(o.graph, planner::store_all_schedule(o.graph));
  EXPECT_DOUBLE_EQ(o.reference_time->predicted_s, all.compute_time_s + all.paging_time_s);
  EXPECT_GT(o.reference_time->measured_s, 0);
  // Timed like the schedule: the same number of iterations, each whole, so its median is
  // comparable with the schedule's.
  auto db = costdb::Database::open_read_only(db_path());
  const app::AttributedRun reference = app::attribution_of(db, o.reference_run_id);
  const std::size_t store_all_steps = app::schedule_plan(o.graph, planner::store_all_schedule(o.graph)).ops.size();
  std::size_t windows = 0;
  for (const auto& w : reference.attribution.windows)
    if (w.span.phase != profiler::Phase::kIdle && w.span.op_id < store_all_steps) ++windows;
  EXPECT_EQ(windows, store_all_steps * static_cast<std::size_t>(o.iterations));
  // The reference is not a validation: its steps are no costs (none stored for its run), and
  // planning again still finds the profile's costs alone.
  EXPECT_TRUE(costdb::list_op_costs(db, std::nullopt, o.reference_run_id).empty());
  app::PlanArgs again = plan_args("host");
  again.objective = "time";
  std::string source;
  (void)app::load_graph(again, &source);
  EXPECT_NE(source.find("from 1 run(s)"), std::string::npos) << source;
}

TEST_F(TimeOnlyProfiling, APlanOnCostsTimedInIterationsIsValidatedAgainByIdOnTheSameCosts) {
  record_without_probe("");
  agent::AgentThread agent(agent_without_probe());
  app::ValidateRequest v = execute_on(agent.link());
  v.iterations = 2;
  v.plan.costs = "iteration";
  try {
    (void)app::validate(v);
    ADD_FAILURE() << "no store-all iteration has run yet";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--budget 100%"), std::string::npos) << e.what();
  }
  // The store-all schedule executed: its steps, timed in iterations, become costs.
  v.plan.costs = "profile";
  v.plan.budget = "100%";
  const app::ValidateOutcome first = app::validate(v);
  v.plan.costs = "iteration";
  v.plan.budget = "50%";
  const app::ValidateOutcome before_page_all = app::validate(v);
  EXPECT_NE(before_page_all.cost_source.find("paging from the profile (no executed page-all schedule"),
            std::string::npos)
      << before_page_all.cost_source;
  // The paging calibration: the page-all schedule, executed on real tensors with real
  // paging (the same gradients as store-all), times each activation's transfers where an
  // iteration meets them.
  v.plan.costs = "profile";
  v.plan.budget = "100%";
  v.plan.planner = "page-all";
  const app::ValidateOutcome page_all = app::validate(v);
  EXPECT_TRUE(page_all.gradients_match());
  EXPECT_GT(page_all.executed->paged_out_bytes, 0U);
  v.plan.costs = "iteration";
  v.plan.budget = "50%";
  v.plan.planner = "poet";
  const app::ValidateOutcome planned = app::validate(v);
  EXPECT_NE(planned.cost_source.find("timed inside executed iterations"), std::string::npos) << planned.cost_source;
  EXPECT_NE(planned.cost_source.find("transfer sizes by page-all's"), std::string::npos) << planned.cost_source;
  {
    auto db = costdb::Database::open_read_only(db_path());
    const auto row = costdb::find_plan_by_id(db, planned.plan_id);
    ASSERT_TRUE(row);
    EXPECT_TRUE(row->costs_from_iterations);
    EXPECT_FALSE(costdb::find_plan_by_id(db, first.plan_id)->costs_from_iterations);
  }
  // The stored plan, validated again by its id, is rebuilt on the costs it was made on: its
  // own execution (it recomputes or pages) is not among them.
  app::ValidateRequest again;
  again.plan_id = planned.plan_id;
  again.db = db_path().string();
  again.execute = true;
  again.port = agent.link();
  again.iterations = 2;
  const app::ValidateOutcome o = app::validate(again);
  EXPECT_NE(o.cost_source.find("transfer sizes by page-all's"), std::string::npos) << o.cost_source;
  EXPECT_DOUBLE_EQ(o.predicted_time_s, planned.predicted_time_s);
}

TEST_F(TimeOnlyProfiling, ValidatingAPlanForOneBoardOnAnotherKindIsRefusedNamingIt) {
  agent::AgentThread agent(agent_without_probe());  // a Linux host
  app::ValidateRequest v;
  v.plan = plan_args("pi4");  // planned on the Pi 4's published profile
  v.db = db_path().string();
  v.execute = true;
  v.port = agent.link();
  try {
    (void)app::validate(v);
    ADD_FAILURE() << "a host's measurements are not a Pi 4's";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a host"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--board host"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ergon
