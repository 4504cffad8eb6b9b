#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/support/test_graphs.h"
#include "gui/model/decimate.h"
#include "gui/model/views.h"
#include "planner/stage_plan.h"
#include "planner/zoo.h"

namespace ergon::gui {
namespace {

TEST(Decimation, KeepsTheMinimumAndMaximumOfEveryPixelColumnExactly) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 1);
  std::uniform_real_distribution<double> gap(0.1, 2.0);
  std::vector<double> x, y;
  double t = 0;
  for (int i = 0; i < 200'000; ++i) {
    t += gap(rng);
    x.push_back(t);
    y.push_back(noise(rng) + (i % 9973 == 0 ? 50.0 : 0.0));  // rare spikes a plot must show
  }
  for (const auto& [x0, x1, pixels] : {std::tuple{0.0, t + 1, std::size_t{2000}},
                                       std::tuple{1000.0, 5000.0, std::size_t{640}},
                                       std::tuple{x[500], x[503], std::size_t{800}}}) {
    const auto columns = decimate(x, y, x0, x1, pixels);
    const double width = (x1 - x0) / static_cast<double>(pixels);
    std::size_t covered = 0;
    for (const Column& c : columns) {
      // Brute force over the column's samples.
      double lo = 1e300, hi = -1e300;
      for (std::size_t i = c.first; i < c.first + c.count; ++i) lo = std::min(lo, y[i]), hi = std::max(hi, y[i]);
      EXPECT_EQ(c.min_y, lo);
      EXPECT_EQ(c.max_y, hi);
      // Every sample of the column lies in it, and none of its neighbours does.
      const auto px = static_cast<std::size_t>((x[c.first] - x0) / width);
      EXPECT_EQ(static_cast<std::size_t>((x[c.first + c.count - 1] - x0) / width), px);
      covered += c.count;
    }
    const auto in_view = std::count_if(x.begin(), x.end(), [&](double v) { return v >= x0 && v < x1; });
    EXPECT_EQ(covered, static_cast<std::size_t>(in_view)) << "every sample in view is in a column";
    const auto line = decimated_polyline(x, y, x0, x1, pixels);
    EXPECT_LE(line.size(), 2 * pixels + 2);
    const double top = std::max_element(line.begin(), line.end(), [](const Point& a, const Point& b) { return a.y < b.y; })->y;
    double truth = -1e300;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] >= x0 && x[i] < x1) truth = std::max(truth, y[i]);
    EXPECT_GE(top, truth) << "the highest spike in view is drawn";
  }
}

TEST(Decimation, AViewBetweenTwoSamplesStillDrawsTheLineAcrossIt) {
  const std::vector<double> x{0, 10}, y{1, 3};
  const auto line = decimated_polyline(x, y, 4, 6, 100);
  ASSERT_EQ(line.size(), 2U);
  EXPECT_EQ(line[0], (Point{0, 1}));
  EXPECT_EQ(line[1], (Point{10, 3}));
  EXPECT_TRUE(decimate(x, y, 4, 6, 100).empty());
  EXPECT_TRUE(decimate(x, y, 6, 4, 100).empty()) << "an empty range";
}

TEST(ScheduleViews, StoreAllIsADiagonalOfComputesWithOutputsKeptUntilUsed) {
  const auto g = planner::build_training_graph(planner::zoo_model("mlp", 1), planner::testing::LinearCosts());
  const auto s = planner::store_all_schedule(g);
  const ScheduleGrid grid = schedule_grid(g, s);
  ASSERT_EQ(grid.stages, g.size());
  for (int t = 0; t < g.size(); ++t) EXPECT_EQ(grid.at(t, t), Cell::kCompute) << t;
  EXPECT_EQ(grid.at(2, 1), Cell::kResident) << "relu1's output is kept for fc2's backward pass";
  EXPECT_EQ(grid.at(2, 0), Cell::kEmpty) << "fc1's output is dropped after relu1 read it";
  EXPECT_EQ(grid.at(0, 1), Cell::kEmpty) << "nothing exists before it is computed";
  const auto memory = memory_timeline(g, s);
  EXPECT_EQ(*std::max_element(memory.begin(), memory.end()), planner::simulate(g, s).peak_bytes);
}

TEST(ScheduleViews, APlanThatPagesAndRecomputesShowsItsMovesAndItsMemoryStaysUnderBudget) {
  const auto g = planner::build_training_graph(planner::zoo_model("resnet18-cifar", 1), planner::testing::LinearCosts());
  const uint64_t budget = planner::simulate(g, planner::store_all_schedule(g)).peak_bytes / 2;
  const auto plan = planner::greedy_stage_plan(g, budget, 1e9, {}, 0.2);
  ASSERT_TRUE(plan);
  const auto s = planner::to_schedule(g, *plan);
  const ScheduleGrid grid = schedule_grid(g, s);
  int recomputes = 0, page_ins = 0, page_outs = 0, computes = 0;
  for (const Cell c : grid.cells) {
    recomputes += c == Cell::kRecompute;
    page_ins += c == Cell::kPageIn;
    page_outs += c == Cell::kPageOut;
    computes += c == Cell::kCompute;
  }
  const ScheduleTotals totals = schedule_totals(g, s);
  EXPECT_EQ(computes, g.size());
  EXPECT_EQ(recomputes, totals.recomputes);
  EXPECT_EQ(page_ins, totals.page_ins);
  EXPECT_EQ(page_outs, totals.page_outs);
  const auto memory = memory_timeline(g, s);
  EXPECT_EQ(memory.size(), s.steps.size());
  EXPECT_LE(*std::max_element(memory.begin(), memory.end()), budget);
  EXPECT_EQ(*std::max_element(memory.begin(), memory.end()), totals.peak_bytes);
}

TEST(ParetoViews, EachPlannerIsASeriesByBudgetWithItsFrontMarked) {
  std::vector<costdb::PlanRow> plans;
  auto add = [&](int64_t id, const char* planner, uint64_t budget, double energy, std::optional<double> deadline = {}) {
    costdb::PlanRow p;
    p.id = id;
    p.planner = planner;
    p.graph_digest = "g1";
    p.budget_bytes = budget;
    p.energy_j = energy;
    p.deadline_s = deadline;
    p.schedule = {1};
    p.created_at_ns = id;
    plans.push_back(p);
  };
  add(1, "poet", 300, 5.0);
  add(2, "poet", 100, 9.0);
  add(3, "poet", 200, 9.5);  // dearer than a smaller budget: not on the front
  add(4, "chen", 200, 7.0, 0.5);
  add(5, "chen", 250, 6.0, 2.0);
  const auto series = pareto_series(plans);
  ASSERT_EQ(series.size(), 2U);
  EXPECT_EQ(series[1].planner, "poet");
  ASSERT_EQ(series[1].points.size(), 3U);
  EXPECT_EQ(series[1].points[0].budget_bytes, 100U);
  EXPECT_TRUE(series[1].points[0].on_front);
  EXPECT_FALSE(series[1].points[1].on_front);
  EXPECT_TRUE(series[1].points[2].on_front);
  const auto tight = pareto_series(plans, "g1", 1.0);
  EXPECT_EQ(tight[0].points.size(), 1U) << "the plan made for a 2 s deadline is left out";
  EXPECT_TRUE(pareto_series(plans, "other").empty());

  // Plans made in other power modes (their own graph digests) are series of their own.
  add(6, "poet", 300, 4.5);
  plans.back().power_mode = "MAXQ";
  plans.back().graph_digest = "g2";
  const auto modes = pareto_series(plans);
  ASSERT_EQ(modes.size(), 3U);
  EXPECT_EQ(modes[2].planner, "poet@MAXQ");
}

TEST(ParetoViews, ABudgetIsPlacedByItsActivationsAsAPercentageOfStoreAll) {
  // 69 MiB of parameters and optimizer state, budgets 21 KB apart: plotted as budgets the
  // points crowd into 69.38..69.41 MiB; as activations they spread over 25..100 %.
  std::vector<costdb::PlanRow> plans;
  for (int i = 0; i < 4; ++i) {
    costdb::PlanRow p;
    p.id = i + 1;
    p.planner = "poet";
    p.objective = "total";
    p.graph_digest = "g";
    p.budget_bytes = (69ULL << 20) + 21'000ULL * static_cast<uint64_t>(i + 1);
    p.energy_j = 5.0 - i;
    p.schedule = {1};
    plans.push_back(p);
  }
  const auto series = pareto_series(plans, {}, std::nullopt, {{"g", MemoryBasis{69ULL << 20, 84'000}}});
  ASSERT_EQ(series.size(), 1U);
  ASSERT_EQ(series[0].points.size(), 4U);
  EXPECT_EQ(series[0].points[0].activation_bytes, 21'000U);
  EXPECT_DOUBLE_EQ(*series[0].points[0].percent_of_store_all, 25.0);
  EXPECT_DOUBLE_EQ(*series[0].points[3].percent_of_store_all, 100.0);
  // Without its graph's basis a point has no percentage, and its activations are its budget.
  const auto unknown = pareto_series(plans);
  EXPECT_FALSE(unknown[0].points[0].percent_of_store_all);
  EXPECT_EQ(unknown[0].points[0].activation_bytes, plans[0].budget_bytes);
}

TEST(PowerViews, SamplesAndSpansShareOneTimeAxisFromTheRunsStart) {
  costdb::RunData run;
  run.tick_hz = 1'000'000;
  for (uint64_t i = 0; i < 10; ++i)
    run.samples.push_back({.rail = 0, .t_ticks = 5'000 + i * 1000, .bus_uv = 5'000'000, .current_ua = 0,
                           .power_uw = static_cast<int32_t>(1'000'000 + i * 100'000), .flags = 0});
  run.samples.push_back({.rail = 1, .t_ticks = 5'500, .bus_uv = 0, .current_ua = 0, .power_uw = 250'000, .flags = 0});
  run.spans.push_back({.op_id = 3, .phase = profiler::Phase::kBackward, .begin_ticks = 6'000, .end_ticks = 9'000,
                       .repetitions = 2});
  const PowerTrace t = power_trace(run);
  ASSERT_EQ(t.t_s.size(), 2U) << "one series per rail";
  EXPECT_DOUBLE_EQ(t.t_s.at(0).front(), 0.0);
  EXPECT_DOUBLE_EQ(t.t_s.at(0).back(), 0.009);
  EXPECT_DOUBLE_EQ(t.power_w.at(0).back(), 1.9);
  EXPECT_DOUBLE_EQ(t.t_s.at(1).front(), 0.0005);
  ASSERT_EQ(t.bands.size(), 1U);
  EXPECT_DOUBLE_EQ(t.bands[0].begin_s, 0.001);
  EXPECT_DOUBLE_EQ(t.bands[0].end_s, 0.004);
  EXPECT_EQ(t.bands[0].phase, profiler::Phase::kBackward);
  EXPECT_DOUBLE_EQ(t.duration_s, 0.009);
  EXPECT_TRUE(power_trace(costdb::RunData{}).t_s.empty()) << "an empty run is an empty trace";
}

TEST(PipelineViews, EachBoardAndEachLinkIsALaneWhoseBarsNeverOverlap) {
  using planner::StageTimes;
  const std::vector<StageTimes> stages{{1.0, 2.0}, {1.5, 2.5}, {0.5, 1.0}};
  const std::vector<planner::LinkModel> links{{1000, 1e4, 0.01, true}, {1000, 1e4, 0.01, false}};
  const auto timeline = planner::simulate_pipeline(stages, links, 4, planner::PipelineOrder::k1F1B);
  const Gantt g = pipeline_gantt(timeline, {"pi4", "pi4", "tx2"}, {"ethernet", "usb-cdc"});
  EXPECT_EQ(g.lanes, (std::vector<std::string>{"pi4", "ethernet", "pi4", "usb-cdc", "tx2"}));
  ASSERT_EQ(g.bars.size(), timeline.tasks.size());
  EXPECT_DOUBLE_EQ(g.makespan_s, timeline.makespan_s);
  for (std::size_t lane = 0; lane < g.lanes.size(); ++lane) {
    std::vector<std::pair<double, double>> spans;
    for (const auto& b : g.bars)
      if (b.lane == static_cast<int>(lane)) spans.emplace_back(b.start_s, b.end_s);
    EXPECT_EQ(spans.size(), 8U) << g.lanes[lane];  // a forward and a backward, or both transfers, per micro-batch
    std::sort(spans.begin(), spans.end());
    // A board runs one task at a time; a full-duplex link may move both ways at once.
    if (lane % 2 == 0 || lane == 3) {
      for (std::size_t k = 1; k < spans.size(); ++k) EXPECT_LE(spans[k - 1].second, spans[k].first + 1e-12);
    }
  }
}

}  // namespace
}  // namespace ergon::gui
