#include "planner/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.h"
#include "planner/schedule.h"
#include "planner/zoo.h"

namespace ergon::planner {
namespace {

/// Costs proportional to the work: 1 ns per FLOP, 1 nJ per FLOP, paging 1 ns and 1 nJ a byte.
class FlopCosts final : public CostModel {
 public:
  NodeCost compute(const std::string&, NodePhase, uint64_t flops, uint64_t) const override {
    return {1e-9 * static_cast<double>(flops), 1e-9 * static_cast<double>(flops)};
  }
  NodeCost page_in(uint64_t bytes) const override { return {1e-9 * static_cast<double>(bytes), 1e-9 * static_cast<double>(bytes)}; }
  NodeCost page_out(uint64_t bytes) const override { return page_in(bytes); }
};

ForwardOp op(std::string name, std::vector<int> inputs, uint64_t flops, uint64_t out_bytes, uint64_t params = 0) {
  ForwardOp o;
  o.name = std::move(name);
  o.op = "linear";
  o.inputs = std::move(inputs);
  o.forward_flops = flops;
  o.backward_flops = 2 * flops;
  o.output_bytes = out_bytes;
  o.param_bytes = params;
  return o;
}

TEST(PipelineCuts, AResidualBlockIsNeverCutInside) {
  ForwardGraph g;
  g.name = "skip";
  g.input_bytes = 100;
  g.ops = {op("a", {kGraphInput}, 10, 100), op("b", {0}, 10, 100), op("c", {1}, 10, 100), op("d", {1, 2}, 10, 100),
           op("e", {3}, 10, 100)};
  std::vector<int> at;
  for (const CutPoint& c : cut_points(g)) at.push_back(c.op);
  // Before c, only b's output crosses (c and d both read b); before d, b's and c's would.
  EXPECT_EQ(at, (std::vector<int>{1, 2, 4}));
  EXPECT_THROW(stage_forward(g, 0, 3), InputError);
  EXPECT_NO_THROW(stage_forward(g, 2, 4));
}

TEST(PipelineCuts, EveryCutOfTheZooCrossesOneTensor) {
  for (const std::string name : {"resnet18-cifar", "mobilenetv2-cifar", "bert-tiny", "vgg16-cifar"}) {
    const ForwardGraph f = zoo_model(name, 1);
    const auto cuts = cut_points(f);
    EXPECT_GE(cuts.size(), 4U) << name;
    for (const CutPoint& c : cuts) {
      EXPECT_EQ(c.bytes, f.ops[c.op - 1].output_bytes);
      for (std::size_t k = c.op; k < f.ops.size(); ++k)
        for (int in : f.ops[k].inputs) EXPECT_GE(in, c.op - 1) << name << " cut before " << c.op;
    }
  }
}

TEST(PipelineStages, StagesOfASplitAddUpToTheWholeModel) {
  const ForwardGraph f = zoo_model("resnet18-cifar", 1);
  const FlopCosts costs;
  const TrainingGraph whole = build_training_graph(f, costs);
  const auto cuts = cut_points(f);
  const int at = cuts[cuts.size() / 2].op;
  const int n = static_cast<int>(f.ops.size());
  const TrainingGraph first = build_stage_graph(f, 0, at, costs);
  const TrainingGraph second = build_stage_graph(f, at, n, costs);
  EXPECT_EQ(first.fixed_bytes + second.fixed_bytes, whole.fixed_bytes);
  EXPECT_NEAR(first.single_pass_time_s() + second.single_pass_time_s(), whole.single_pass_time_s(),
              1e-9 * whole.single_pass_time_s());
  // The first stage ends in a free receive of the gradient, not a loss.
  EXPECT_EQ(first.nodes[at].op, "receive");
  EXPECT_EQ(first.nodes[at].time_s, 0);
  EXPECT_EQ(first.nodes[at].output_bytes, f.ops[at - 1].output_bytes);
  EXPECT_EQ(second.nodes[n - at].name, "loss");
  // The second stage's first op sends its input's gradient back.
  EXPECT_EQ(second.nodes[2 * (n - at)].output_bytes, f.ops[at - 1].output_bytes);
  EXPECT_EQ(first.nodes[2 * at].output_bytes, 0U);  // the data batch needs none
}

TEST(PipelineStages, TheStashIsWhatAMicroBatchKeepsBetweenItsPasses) {
  ForwardGraph g;
  g.name = "chain";
  g.input_bytes = 8;
  g.ops = {op("a", {kGraphInput}, 100, 10), op("b", {0}, 200, 20), op("c", {1}, 300, 40)};
  const TrainingGraph t = build_training_graph(g, FlopCosts());
  const ScheduleReport r = simulate(t, store_all_schedule(t));
  // b and c read their inputs in the backward pass, and the loss reads c: a, b and c stay.
  EXPECT_EQ(r.stash_bytes, 10U + 20U + 40U);
  EXPECT_NEAR(r.forward_end_s, 600e-9, 1e-15);
  // The backward part begins with the loss.
  const Schedule sa = store_all_schedule(t);
  ASSERT_LT(r.stash_step, sa.steps.size());
  EXPECT_EQ(sa.steps[r.stash_step].node, 3);
  EXPECT_EQ(backward_part_begins(t, sa), r.stash_step);
  EXPECT_GT(r.makespan_s, r.forward_end_s);
}

TEST(PipelineTimeline, EqualStagesTakeKPlusSMinusOneSlots) {
  const std::vector<StageTimes> stages(3, StageTimes{1.0, 2.0});
  const std::vector<LinkModel> links(2, LinkModel{0, 1.0, 0, true});
  for (const auto order : {PipelineOrder::k1F1B, PipelineOrder::kGPipe}) {
    const PipelineTimeline t = simulate_pipeline(stages, links, 4, order);
    EXPECT_DOUBLE_EQ(t.makespan_s, (4 + 3 - 1) * 3.0) << to_string(order);
    EXPECT_EQ(t.tasks.size(), 3U * 2 * 4 + 2U * 2 * 4);
    EXPECT_DOUBLE_EQ(t.busy_s[0], 12.0);
    EXPECT_NEAR(t.bubble_fraction(0), 1 - 12.0 / 18.0, 1e-12);
  }
}

TEST(PipelineTimeline, OneMicroBatchWaitsForEveryTransfer) {
  const std::vector<StageTimes> stages{{1.0, 2.0}, {3.0, 4.0}};
  const std::vector<LinkModel> links{{1000, 1000.0, 0.5, true}};  // 1.5 s a transfer
  const PipelineTimeline t = simulate_pipeline(stages, links, 1, PipelineOrder::k1F1B);
  EXPECT_DOUBLE_EQ(t.makespan_s, 1 + 1.5 + 3 + 4 + 1.5 + 2);
}

TEST(PipelineTimeline, AHalfDuplexLinkCarriesOneTransferAtATime) {
  // Quick stages, a 1 s link: with both directions at once, the first gradient goes back
  // while the second activation goes forward; on one channel it queues behind it.
  const std::vector<StageTimes> stages{{0.001, 0.001}, {0.001, 0.001}};
  const PipelineTimeline full = simulate_pipeline(stages, {{1, 1.0, 0, true}}, 2, PipelineOrder::k1F1B);
  const PipelineTimeline half = simulate_pipeline(stages, {{1, 1.0, 0, false}}, 2, PipelineOrder::k1F1B);
  EXPECT_NEAR(full.makespan_s, 3.004, 1e-9);
  EXPECT_NEAR(half.makespan_s, 4.002, 1e-9);
}

TEST(PipelineTimeline, OneFOneBHoldsFewerMicroBatchesThanGPipe) {
  EXPECT_EQ(in_flight(0, 4, 8, PipelineOrder::k1F1B), 4);
  EXPECT_EQ(in_flight(3, 4, 8, PipelineOrder::k1F1B), 1);
  EXPECT_EQ(in_flight(0, 4, 2, PipelineOrder::k1F1B), 2);
  EXPECT_EQ(in_flight(3, 4, 8, PipelineOrder::kGPipe), 8);
}

/// A synthetic model: op k costs w[k] on a board of speed v[s]; a stage holding more than
/// `cap` ops does not fit.
struct Synthetic {
  std::vector<double> work;
  std::vector<double> speed;
  std::vector<double> power;
  int cap = 1000;
  StageCost operator()(int s, int first, int end) const {
    if (end - first > cap) return {false, "too many ops", {}, 0};
    double w = 0;
    for (int k = first; k < end; ++k) w += work[k];
    const double t = w / speed[s];
    return {true, "", {t / 3, 2 * t / 3}, power[s] * t};
  }
};

SplitRequest synthetic_request(std::mt19937& rng, int ops, int stages) {
  SplitRequest r;
  r.ops = ops;
  std::uniform_int_distribution<uint64_t> bytes(1, 1000);
  for (int c = 1; c < ops; ++c)
    if (rng() % 3 != 0) r.cuts.push_back({c, bytes(rng)});
  r.microbatches = 1 + static_cast<int>(rng() % 6);
  std::uniform_real_distribution<double> idle(0.1, 3);
  for (int s = 0; s < stages; ++s) r.idle_w.push_back(idle(rng));
  for (int s = 0; s + 1 < stages; ++s) r.links.push_back({1e4, 1e-3, rng() % 2 == 0, 1e-6, 1e-6});
  return r;
}

TEST(PipelineSplit, TheDynamicProgramComesWithinOnePercentOfEverySplitTried) {
  std::mt19937 rng(7);
  int exact = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int ops = 12 + static_cast<int>(rng() % 20);
    const int stages = 2 + static_cast<int>(rng() % 3);
    SplitRequest r = synthetic_request(rng, ops, stages);
    Synthetic model;
    std::uniform_real_distribution<double> u(0.5, 2);
    for (int k = 0; k < ops; ++k) model.work.push_back(u(rng));
    for (int s = 0; s < stages; ++s) {
      model.speed.push_back(u(rng));
      model.power.push_back(u(rng));
    }
    r.throughput = trial % 4 == 0;
    const SplitResult all = best_split(r, model);
    ASSERT_TRUE(all.exhaustive);
    r.exhaustive_limit = 0;
    const SplitResult dp = best_split(r, model);
    ASSERT_FALSE(dp.exhaustive);
    ASSERT_EQ(all.best.has_value(), dp.best.has_value()) << trial;
    if (!all.best) continue;
    const auto score = [&](const SplitPrediction& p) { return r.throughput ? p.makespan_s : p.energy_j(); };
    EXPECT_GE(score(*dp.best), score(*all.best) * (1 - 1e-12)) << trial;  // the exhaustive search is exact
    EXPECT_LE(score(*dp.best), score(*all.best) * 1.01) << trial;
    exact += score(*dp.best) <= score(*all.best) * (1 + 1e-12) ? 1 : 0;
    EXPECT_LT(dp.splits_simulated, all.splits_simulated + 1);
  }
  EXPECT_GE(exact, 30);  // and finds the very best split in most cases
}

TEST(PipelineSplit, LowerBoundsRefinedWhereTheBestSplitUsesThemGiveTheSameSplit) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int ops = 10 + static_cast<int>(rng() % 12);
    SplitRequest r = synthetic_request(rng, ops, 2 + static_cast<int>(rng() % 2));
    Synthetic model;
    std::uniform_real_distribution<double> u(0.5, 2);
    for (int k = 0; k < ops; ++k) model.work.push_back(u(rng));
    for (int s = 0; s < r.stages(); ++s) {
      model.speed.push_back(u(rng));
      model.power.push_back(u(rng));
    }
    // Stages of more than four ops are known only by a bound at first, 30 % below the truth.
    int exact_calls = 0;
    const StageEvaluator exact = [&](int s, int first, int end) {
      ++exact_calls;
      return model(s, first, end);
    };
    const StageEvaluator bound = [&](int s, int first, int end) {
      StageCost c = model(s, first, end);
      if (end - first > 4) {
        c.exact = false;
        c.times.forward_s *= 0.7;
        c.times.backward_s *= 0.7;
        c.dynamic_j *= 0.7;
      }
      return c;
    };
    const SplitResult plain = best_split(r, model);
    const SplitResult lazy = best_split(r, exact, bound);
    ASSERT_TRUE(plain.best && lazy.best) << trial;
    EXPECT_DOUBLE_EQ(lazy.best->energy_j(), plain.best->energy_j()) << trial;
    EXPECT_EQ(static_cast<std::size_t>(exact_calls), lazy.stages_refined);
    EXPECT_LT(lazy.stages_refined, lazy.stages_evaluated);
  }
}

TEST(PipelineSplit, EnergyCountsEveryBoardsIdleOverTheWholeBatch) {
  std::mt19937 rng(3);
  SplitRequest r = synthetic_request(rng, 10, 2);
  Synthetic model{std::vector<double>(10, 1.0), {1, 1}, {1, 1}};
  const SplitResult res = best_split(r, model);
  ASSERT_TRUE(res.best);
  const auto& p = *res.best;
  EXPECT_NEAR(p.idle_j, (r.idle_w[0] + r.idle_w[1]) * p.makespan_s, 1e-12);
  EXPECT_NEAR(p.compute_j, r.microbatches * (p.stages[0].dynamic_j + p.stages[1].dynamic_j), 1e-12);
  uint64_t bytes = 0;
  for (const auto& c : r.cuts)
    if (c.op == p.bounds[1]) bytes = c.bytes;
  EXPECT_NEAR(p.link_j, r.microbatches * 2.0 * static_cast<double>(bytes) * 2e-6, 1e-12);
}

TEST(PipelineSplit, SaysWhichOpsFitNoBoard) {
  std::mt19937 rng(5);
  SplitRequest r = synthetic_request(rng, 8, 2);
  Synthetic model{std::vector<double>(8, 1.0), {1, 1}, {1, 1}, /*cap=*/0};
  const SplitResult res = best_split(r, model);
  EXPECT_FALSE(res.best);
  EXPECT_NE(res.why.find("can hold them"), std::string::npos) << res.why;
}

TEST(PipelineSplit, SaysWhenNoSplitMeetsTheDeadline) {
  std::mt19937 rng(5);
  SplitRequest r = synthetic_request(rng, 8, 2);
  r.deadline_s = 1e-6;
  Synthetic model{std::vector<double>(8, 1.0), {1, 1}, {1, 1}};
  const SplitResult res = best_split(r, model);
  EXPECT_FALSE(res.best);
  EXPECT_NE(res.why.find("deadline"), std::string::npos) << res.why;
}

TEST(PipelineSplit, MoreBoardsThanPlacesToCutIsRefused) {
  SplitRequest r;
  r.ops = 3;
  r.cuts = {{1, 10}};
  r.idle_w = {1, 1, 1};
  r.links.assign(2, LinkCost{1, 0, true, 0, 0});
  Synthetic model{std::vector<double>(3, 1.0), {1, 1, 1}, {1, 1, 1}};
  const SplitResult res = best_split(r, model);
  EXPECT_FALSE(res.best);
  EXPECT_NE(res.why.find("at most 2 board(s)"), std::string::npos) << res.why;
}

TEST(PipelineSplit, EqualSplitBalancesOpCounts) {
  SplitRequest r;
  r.ops = 12;
  for (int c = 1; c < 12; ++c) r.cuts.push_back({c, 1});
  r.idle_w = {1, 1, 1};
  EXPECT_EQ(equal_split(r), (std::vector<int>{0, 4, 8, 12}));
}

}  // namespace
}  // namespace ergon::planner
