#include "app/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>

#include "common/error.h"
#include "planner/schedule.h"

namespace ergon::app {
namespace {

PipelineArgs resnet_on_two_pi4s() {
  PipelineArgs a;
  a.model = "resnet18-cifar";
  a.boards = {"pi4", "pi4"};
  a.microbatches = 4;
  return a;
}

TEST(Pipeline, ResNet18OnTwoPi4sGivesStagesSchedulesAndAPrediction) {
  const PipelineOutcome o = plan_pipeline(resnet_on_two_pi4s());
  ASSERT_EQ(o.stages.size(), 2U);
  EXPECT_EQ(o.stages[0].first_op, 0);
  EXPECT_EQ(o.stages[0].end_op, o.stages[1].first_op);
  EXPECT_EQ(o.stages[1].end_op, o.ops);
  for (const auto& st : o.stages) {
    EXPECT_TRUE(st.sim.valid);
    EXPECT_LE(st.memory_bytes, st.budget_bytes);
    EXPECT_FALSE(st.schedule.steps.empty());
  }
  EXPECT_EQ(o.stages[0].in_flight, 2);  // 1F1B: the first of two stages holds two micro-batches
  EXPECT_EQ(o.stages[1].in_flight, 1);
  EXPECT_GT(o.stages[1].input_bytes, 0U);
  const auto& p = o.prediction;
  EXPECT_NEAR(p.energy_j(), p.compute_j + p.idle_j + p.link_j, 1e-12);
  EXPECT_GT(p.idle_j, 0);
  // Ethernet's own power is not published: the energy says it is a lower bound.
  ASSERT_EQ(o.missing_link_energy.size(), 1U);
  EXPECT_NE(o.missing_link_energy[0].find("ethernet"), std::string::npos);
  EXPECT_EQ(p.link_j, 0);
  ASSERT_EQ(o.links.size(), 1U);
  EXPECT_GT(o.links[0].bytes, 0U);
}

TEST(Pipeline, TwoBoardsBeatOneInTimeButNotInIdleEnergy) {
  PipelineArgs two = resnet_on_two_pi4s();
  PipelineArgs one = two;
  one.boards = {"pi4"};
  const PipelineOutcome a = plan_pipeline(one);
  const PipelineOutcome b = plan_pipeline(two);
  EXPECT_LT(b.prediction.makespan_s, a.prediction.makespan_s);
  // The same work above idle, but two boards idle through the batch.
  EXPECT_NEAR(b.prediction.compute_j, a.prediction.compute_j, 0.01 * a.prediction.compute_j);
  EXPECT_GT(b.prediction.energy_j(), a.prediction.energy_j());
}

TEST(Pipeline, TheChosenSplitIsNoWorseThanTheEqualSplit) {
  const PipelineArgs args = resnet_on_two_pi4s();
  const PipelineOutcome best = plan_pipeline(args);
  const PipelineOutcome equal = predict_pipeline(args, equal_starts(args));
  EXPECT_LE(best.prediction.energy_j(), equal.prediction.energy_j() * (1 + 1e-12));
  PipelineArgs fast = args;
  fast.throughput = true;
  EXPECT_LE(plan_pipeline(fast).prediction.makespan_s, equal.prediction.makespan_s * (1 + 1e-12));
}

TEST(Pipeline, AModelTooBigForOneNrf52840SpreadsOverFour) {
  PipelineArgs a;
  a.model = "mlp:128,128,128,128,10";
  a.boards = {"nrf52840"};
  EXPECT_THROW(plan_pipeline(a), InputError);
  a.boards.assign(4, "nrf52840");
  const PipelineOutcome o = plan_pipeline(a);
  ASSERT_EQ(o.stages.size(), 4U);
  for (const auto& st : o.stages) EXPECT_LE(st.memory_bytes, st.budget_bytes);
}

TEST(Pipeline, ATightBudgetMakesAStageRecomputeOrPage) {
  PipelineArgs a = resnet_on_two_pi4s();
  a.batch = 8;
  a.time_limit_s = 10;
  // Store-all of two micro-batches in flight does not fit the first stage's board.
  a.budgets = {"90MiB"};
  const PipelineOutcome o = plan_pipeline(a);
  int planned = 0;
  for (const auto& st : o.stages) {
    EXPECT_LE(st.memory_bytes, st.budget_bytes);
    EXPECT_EQ(st.memory_bytes,
              st.fixed_bytes + st.in_flight * (st.input_bytes + st.stash_bytes) + st.peak_bytes - st.stash_bytes);
    planned += st.planner == "poet" ? 1 : 0;
  }
  EXPECT_GE(planned, 1);
  a.planner = "store-all";
  EXPECT_THROW(plan_pipeline(a), InputError);
}

TEST(Pipeline, ABudgetBelowTheModelsWeightsSaysWhichOpsFitNoBoard) {
  PipelineArgs a = resnet_on_two_pi4s();
  a.budgets = {"1MiB"};
  try {
    plan_pipeline(a);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("can hold them"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1048576 B"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, ThePlannedPipelineOnRealTensorsGivesTheWholeModelsGradients) {
  PipelineArgs a = resnet_on_two_pi4s();
  a.microbatches = 2;
  const PipelineOutcome o = plan_pipeline(a);
  const GradientCheck c = check_gradients(o, (std::filesystem::temp_directory_path() / "ergon_app_pipeline").string());
  EXPECT_TRUE(c.equal()) << c.first_mismatch;
  EXPECT_EQ(c.microbatches, 2);
  EXPECT_GT(c.parameter_tensors, 2 * 20);  // ResNet-18's convolutions, norms and classifier
  PipelineArgs m;
  m.model = "mlp:64,32,32,32,10";
  m.boards.assign(3, "pi4");
  m.microbatches = 3;
  m.order = "gpipe";
  const GradientCheck three = check_gradients(plan_pipeline(m), (std::filesystem::temp_directory_path() / "ergon_app_mlp").string());
  EXPECT_TRUE(three.equal()) << three.first_mismatch;
  EXPECT_EQ(three.stages, 3);
}

TEST(Pipeline, ABoardOffTheCriticalPathRunsInACappedModeWithPowerModeAuto) {
  PipelineArgs fixed = resnet_on_two_pi4s();
  fixed.boards = {"pi4", "tx2"};
  fixed.microbatches = 8;
  PipelineArgs automatic = fixed;
  automatic.power_modes = {"auto"};
  // The TX2 gets the last blocks only: it waits on the Pi 4 most of the batch.
  const PipelineOutcome a = predict_pipeline(fixed, {57});
  const PipelineOutcome b = predict_pipeline(automatic, {57});
  EXPECT_NE(b.stages[1].power_mode, "MAXN");
  EXPECT_EQ(b.stages[0].power_mode, "1500MHz");
  EXPECT_LT(b.prediction.energy_j(), a.prediction.energy_j());
  EXPECT_LT(b.prediction.compute_j, a.prediction.compute_j);
  // Chosen with the split, auto never costs more than the default modes.
  EXPECT_LE(plan_pipeline(automatic).prediction.energy_j(), plan_pipeline(fixed).prediction.energy_j() * (1 + 1e-12));
  automatic.power_modes = {"auto", "auto", "auto"};
  EXPECT_THROW(plan_pipeline(automatic), InputError);
}

TEST(Pipeline, RandomModelsBoardsAndBudgetsGiveAValidPlanOrOneLineSayingWhy) {
  std::mt19937 rng(2026);
  const std::vector<std::string> kinds{"pi4", "tx2"};
  int planned = 0, refused = 0, with_poet = 0;
  auto check = [&](const PipelineArgs& a) -> std::optional<PipelineOutcome> {
    try {
      PipelineOutcome o = plan_pipeline(a);
      ++planned;
      EXPECT_EQ(o.stages.size(), a.boards.size()) << a.model;
      int next = 0;
      for (const auto& st : o.stages) {
        EXPECT_EQ(st.first_op, next) << a.model;
        EXPECT_GT(st.end_op, st.first_op);
        next = st.end_op;
        EXPECT_LE(st.memory_bytes, st.budget_bytes) << a.model;
        EXPECT_TRUE(planner::simulate(st.graph, st.schedule).valid) << a.model;
        with_poet += st.planner == "poet" ? 1 : 0;
      }
      EXPECT_EQ(next, o.ops);
      const auto& p = o.prediction;
      EXPECT_NEAR(p.energy_j(), p.compute_j + p.idle_j + p.link_j, 1e-9 * p.energy_j());
      EXPECT_GT(p.makespan_s, 0);
      return o;
    } catch (const InputError& e) {
      ++refused;
      const std::string why = e.what();
      EXPECT_FALSE(why.empty());
      EXPECT_EQ(why.find('\n'), std::string::npos) << why;  // one line
      return std::nullopt;
    }
  };
  for (int trial = 0; trial < 12; ++trial) {
    PipelineArgs a;
    std::string model = "mlp:" + std::to_string(64 + rng() % 512);
    const int layers = 2 + static_cast<int>(rng() % 5);
    for (int l = 0; l < layers; ++l) model += "," + std::to_string(32 + rng() % 512);
    a.model = model + ",10";
    const int boards = 1 + static_cast<int>(rng() % 3);
    for (int b = 0; b < boards; ++b) a.boards.push_back(kinds[rng() % kinds.size()]);
    a.microbatches = 1 + static_cast<int>(rng() % 6);
    a.batch = 64 + static_cast<int>(rng() % 512);
    a.order = rng() % 2 ? "1f1b" : "gpipe";
    a.time_limit_s = 5;
    // Each board's whole RAM first; then a budget leaving the largest stage 30 to 95 % of the
    // activation memory it took, which stages meet by recomputing and paging, or cannot.
    const auto roomy = check(a);
    if (!roomy) continue;
    const auto& largest = *std::max_element(roomy->stages.begin(), roomy->stages.end(),
                                            [](const auto& x, const auto& y) { return x.memory_bytes < y.memory_bytes; });
    const uint64_t fixed = largest.fixed_bytes + largest.in_flight * largest.input_bytes;
    const double share = std::uniform_real_distribution<double>(0.3, 0.95)(rng);
    a.budgets = {std::to_string(fixed + static_cast<uint64_t>(share * static_cast<double>(largest.memory_bytes - fixed)))};
    check(a);
  }
  EXPECT_GT(planned, 12);
  EXPECT_GT(refused, 0);
  EXPECT_GT(with_poet, 0);
  RecordProperty("planned", planned);
  RecordProperty("refused", refused);
  RecordProperty("planned_with_poet", with_poet);
}

TEST(Pipeline, RealTorchvisionExportsSplitAtTheirOwnCutPoints) {
  // PyTorch's exports (tests/data/onnx/README.md): a CNN with inverted residuals, and a
  // transformer encoder whose attention blocks must not be cut inside.
  for (const char* file : {"mobilenet_v2.onnx", "transformer_encoder.onnx"}) {
    PipelineArgs a;
    a.onnx_file = std::string(ERGON_TEST_DATA_DIR) + "/onnx/" + file;
    a.boards = {"pi4", "tx2"};
    a.time_limit_s = 20;
    const PipelineOutcome o = plan_pipeline(a);
    EXPECT_GE(o.cuts.size(), 10U) << file;
    ASSERT_EQ(o.stages.size(), 2U) << file;
    EXPECT_EQ(o.stages[0].end_op, o.stages[1].first_op);
    EXPECT_EQ(o.stages[1].end_op, o.ops);
    const planner::ForwardGraph& f = *o.forward;
    const int cut = o.stages[1].first_op;
    for (std::size_t k = cut; k < f.ops.size(); ++k)
      for (int in : f.ops[k].inputs) EXPECT_GE(in, cut - 1) << file << ": " << f.ops[k].name;
    for (const auto& st : o.stages) EXPECT_LE(st.memory_bytes, st.budget_bytes) << file;
  }
}

TEST(Pipeline, BadRequestsAreRefusedInOneLine) {
  PipelineArgs a = resnet_on_two_pi4s();
  a.links = {"carrier-pigeon"};
  EXPECT_THROW(plan_pipeline(a), InputError);
  a = resnet_on_two_pi4s();
  a.deadline = "1.5x";
  EXPECT_THROW(plan_pipeline(a), InputError);
  a = resnet_on_two_pi4s();
  a.boards = {"pi4", "pi5"};
  EXPECT_THROW(plan_pipeline(a), InputError);
  a = resnet_on_two_pi4s();
  EXPECT_THROW(predict_pipeline(a, {1, 2}), InputError);  // two starts for two boards
  a.deadline = "1ms";
  EXPECT_THROW(plan_pipeline(a), InputError);
}

}  // namespace
}  // namespace ergon::app
