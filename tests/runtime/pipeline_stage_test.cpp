// A model split into pipeline stages, run stage by stage on real tensors with activations
// handed forward and gradients handed back, computes exactly what the whole model computes.

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "planner/milp.h"
#include "planner/pipeline.h"
#include "planner/planners.h"
#include "planner/zoo.h"
#include "runtime/executor.h"

namespace ergon::runtime {
namespace {

/// Costs that make planners choose (1 ns a FLOP; paging dear).
class FlopCosts final : public planner::CostModel {
 public:
  planner::NodeCost compute(const std::string&, planner::NodePhase, uint64_t flops, uint64_t) const override {
    return {1e-9 * static_cast<double>(flops) + 1e-6, 1e-9 * static_cast<double>(flops) + 1e-6};
  }
  planner::NodeCost page_in(uint64_t bytes) const override {
    return {1e-7 * static_cast<double>(bytes), 1e-7 * static_cast<double>(bytes)};
  }
  planner::NodeCost page_out(uint64_t bytes) const override { return page_in(bytes); }
};

struct Stage {
  planner::ForwardGraph forward;
  planner::TrainingGraph graph;
  planner::Schedule schedule;
  std::size_t split = 0;  // where the backward part begins
  std::unique_ptr<TrainingIteration> it;
};

/// Runs `model` split before each op in `starts` for one micro-batch and compares every
/// parameter gradient and the loss with the whole model's store-all run, bit for bit.
/// `recompute_stage`: that stage runs POET's schedule under a third of store-all's spare memory.
void expect_stages_equal_whole(const std::string& model, int batch, const std::vector<int>& starts,
                               int recompute_stage = -1) {
  const planner::ForwardGraph forward = planner::zoo_model(model, batch);
  const planner::TrainingGraph whole = structure_of(forward);
  const auto scratch = std::filesystem::temp_directory_path() / ("ergon_pipeline_stage_" + model);
  const uint32_t seed = 3;
  const ExecutionResult expected = execute(forward, whole, planner::store_all_schedule(whole), scratch / "whole", seed);
  const auto params = initial_parameters(forward, whole, seed);

  std::vector<int> bounds{0};
  bounds.insert(bounds.end(), starts.begin(), starts.end());
  bounds.push_back(static_cast<int>(forward.ops.size()));
  const FlopCosts costs;
  std::vector<Stage> stages(bounds.size() - 1);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    Stage& st = stages[s];
    st.forward = planner::stage_forward(forward, bounds[s], bounds[s + 1]);
    st.graph = planner::build_stage_graph(forward, bounds[s], bounds[s + 1], costs);
    st.schedule = planner::store_all_schedule(st.graph);
    if (static_cast<int>(s) == recompute_stage) {
      planner::PlanRequest req;
      req.objective = planner::Objective::kPoet;
      const uint64_t least = st.graph.min_working_set_bytes();
      req.budget_bytes = least + (st.graph.store_all_peak_bytes() - least) / 3;
      req.deadline_s = std::numeric_limits<double>::infinity();
      req.time_limit_s = 2;
      req.relative_gap = 0.05;
      auto solver = planner::make_cbc_solver();
      const planner::PlanResult r = planner::run_planner("poet", st.graph, req, *solver);
      ASSERT_TRUE(r.schedule) << r.why;
      st.schedule = *r.schedule;
      const planner::ScheduleReport rep = planner::simulate(st.graph, st.schedule);
      EXPECT_GT(rep.recomputes + rep.page_ins, 0);
    }
    st.split = planner::backward_part_begins(st.graph, st.schedule);
    st.it = std::make_unique<TrainingIteration>(st.forward, st.graph, scratch / std::to_string(s), seed);
    std::vector<std::vector<float>> mine(params.begin() + bounds[s], params.begin() + bounds[s + 1]);
    st.it->set_parameters(mine);
  }
  // Forward parts in order, each handing its output on; then backward parts in reverse,
  // each handing its input's gradient back.
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (s > 0) stages[s].it->set_input(stages[s - 1].it->output());
    for (std::size_t k = 0; k < stages[s].split; ++k) stages[s].it->run(stages[s].schedule.steps[k]);
  }
  for (std::size_t s = stages.size(); s-- > 0;) {
    if (s + 1 < stages.size()) stages[s].it->set_output_gradient(stages[s + 1].it->input_gradient());
    for (std::size_t k = stages[s].split; k < stages[s].schedule.steps.size(); ++k)
      stages[s].it->run(stages[s].schedule.steps[k]);
  }
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const ExecutionResult got = stages[s].it->finish();
    for (int op = bounds[s]; op < bounds[s + 1]; ++op)
      EXPECT_EQ(got.parameter_grads[static_cast<std::size_t>(op - bounds[s])],
                expected.parameter_grads[static_cast<std::size_t>(op)])
          << model << " op " << forward.ops[static_cast<std::size_t>(op)].name;
    if (s + 1 == stages.size()) {
      EXPECT_EQ(got.loss, expected.loss);
    }
  }
  std::filesystem::remove_all(scratch);
}

TEST(PipelineStages, AnMlpSplitInTwoComputesTheWholeModelsGradients) {
  expect_stages_equal_whole("mlp:64,32,32,10", 4, {2});
}

TEST(PipelineStages, AResNetSplitBeforeBlocksSumsTheInputGradientOverTheSkipAndTheBranch) {
  const planner::ForwardGraph f = planner::zoo_model("resnet18-cifar", 1);
  const auto cuts = planner::cut_points(f);
  ASSERT_GE(cuts.size(), 6U);
  // Cut where a residual block begins: its input feeds the block's first conv and its skip.
  std::vector<int> starts;
  for (const auto& c : cuts) {
    int readers = 0;
    for (std::size_t k = c.op; k < f.ops.size(); ++k)
      for (int in : f.ops[k].inputs) readers += in == c.op - 1 ? 1 : 0;
    if (readers >= 2 && (starts.empty() || c.op > starts.back() + 8)) starts.push_back(c.op);
    if (starts.size() == 2) break;
  }
  ASSERT_EQ(starts.size(), 2U);
  expect_stages_equal_whole("resnet18-cifar", 1, starts, /*recompute_stage=*/1);
}

TEST(PipelineStages, AStageRefusesAnInputOrGradientOfTheWrongSize) {
  const planner::ForwardGraph forward = planner::zoo_model("mlp:64,32,32,10", 2);
  const FlopCosts costs;
  const auto f = planner::stage_forward(forward, 0, 2);
  const auto g = planner::build_stage_graph(forward, 0, 2, costs);
  TrainingIteration it(f, g, std::filesystem::temp_directory_path() / "ergon_stage_sizes", 1);
  EXPECT_THROW(it.set_input(std::vector<float>(3)), InputError);
  EXPECT_THROW(it.set_output_gradient(std::vector<float>(3)), InputError);
  EXPECT_THROW((void)it.input_gradient(), InputError);  // it was given no input
  // The receive node without a gradient names what is missing.
  const auto s = planner::store_all_schedule(g);
  EXPECT_THROW(
      {
        for (const auto& step : s.steps) it.run(step);
      },
      DeviceError);
}

}  // namespace
}  // namespace ergon::runtime
