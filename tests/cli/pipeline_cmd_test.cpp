#include "cli/pipeline_cmd.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "planner/graph_json.h"
#include "planner/schedule.h"

namespace ergon::cli {
namespace {

app::PipelineArgs two_pi4s() {
  app::PipelineArgs a;
  a.model = "resnet18-cifar";
  a.boards = {"pi4", "pi4"};
  a.microbatches = 4;
  return a;
}

nlohmann::json run_json(const app::PipelineArgs& args, const std::string& split = "best") {
  std::ostringstream out;
  EXPECT_EQ(run_pipeline(args, PipelineOutput{.json = true, .split = split}, out), 0);
  return nlohmann::json::parse(out.str());
}

TEST(PipelineCommand, JsonGivesStagesSchedulesAndPredictions) {
  const nlohmann::json j = run_json(two_pi4s());
  ASSERT_EQ(j["stages"].size(), 2U);
  EXPECT_EQ(j["bounds"].front(), 0);
  EXPECT_EQ(j["bounds"].back(), j["ops"]);
  for (const auto& st : j["stages"]) {
    EXPECT_EQ(st["board"], "pi4");
    EXPECT_LE(st["memory_bytes"].get<uint64_t>(), st["budget_bytes"].get<uint64_t>());
    EXPECT_GT(st["steps"].get<int>(), 0);
    EXPECT_GT(st["forward_s"].get<double>(), 0);
  }
  const auto& p = j["prediction"];
  EXPECT_NEAR(p["energy_per_batch_j"].get<double>(),
              p["compute_j"].get<double>() + p["idle_j"].get<double>() + p["link_j"].get<double>(), 1e-9);
  EXPECT_TRUE(p["energy_is_lower_bound"].get<bool>());  // ethernet's own power is not published
  // Two boards and one link, four micro-batches: a forward and a backward each, both ways.
  EXPECT_EQ(j["timeline"].size(), 2U * 2 * 4 + 1U * 2 * 4);
  EXPECT_TRUE(j["links"][0]["energy_j_per_byte"].is_null());
  EXPECT_FALSE(j["links"][0]["sources"].empty());
}

TEST(PipelineCommand, AGivenSplitIsPredictedAsGiven) {
  const nlohmann::json best = run_json(two_pi4s());
  const int start = best["bounds"][1];
  const nlohmann::json same = run_json(two_pi4s(), std::to_string(start));
  EXPECT_EQ(same["bounds"], best["bounds"]);
  EXPECT_DOUBLE_EQ(same["prediction"]["energy_per_batch_j"].get<double>(),
                   best["prediction"]["energy_per_batch_j"].get<double>());
  std::ostringstream out;
  EXPECT_THROW(run_pipeline(two_pi4s(), PipelineOutput{.json = true, .split = "middle"}, out), InputError);
  // Inside a residual block more than one tensor crosses.
  const nlohmann::json cuts = best["cut_points"];
  int inside = 1;
  for (const auto& c : cuts)
    if (c["op"].get<int>() == inside) ++inside;
  EXPECT_THROW(run_pipeline(two_pi4s(), PipelineOutput{.json = true, .split = std::to_string(inside)}, out),
               InputError);
}

TEST(PipelineCommand, TextSaysTheEnergyIsALowerBoundWhereALinksPowerIsUnknown) {
  std::ostringstream out;
  ASSERT_EQ(run_pipeline(two_pi4s(), PipelineOutput{}, out), 0);
  EXPECT_NE(out.str().find(">= "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("no published energy per byte"), std::string::npos) << out.str();
  app::PipelineArgs measured = two_pi4s();
  measured.link_energy_j_per_byte = 1e-8;
  std::ostringstream known;
  ASSERT_EQ(run_pipeline(measured, PipelineOutput{}, known), 0);
  EXPECT_EQ(known.str().find(">= "), std::string::npos) << known.str();
}

TEST(PipelineCommand, OutWritesEachStagesGraphAndScheduleForOtherTools) {
  const auto dir = std::filesystem::temp_directory_path() / "ergon_pipeline_out";
  std::filesystem::remove_all(dir);
  std::ostringstream out;
  ASSERT_EQ(run_pipeline(two_pi4s(), PipelineOutput{.json = true, .out_dir = dir.string()}, out), 0);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  for (int s = 0; s < 2; ++s) {
    const auto graph = planner::read_graph_json(dir / ("stage" + std::to_string(s) + ".json"));
    std::ifstream f(dir / ("stage" + std::to_string(s) + ".sched"), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    int nodes = 0;
    const planner::Schedule schedule = planner::decode_schedule(bytes, &nodes);
    EXPECT_EQ(nodes, graph.size());
    EXPECT_EQ(schedule.steps.size(), j["stages"][s]["steps"].get<std::size_t>());
    EXPECT_TRUE(planner::simulate(graph, schedule).valid);  // a plan another tool can replay
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ergon::cli

namespace ergon::cli {
namespace {

// --validate prints predicted against measured per board and per batch; JSON says the same.
TEST(PipelineCommand, ValidateRunsThePlanOnSimulatedBoardsAndReportsBothSides) {
  const auto dir = std::filesystem::temp_directory_path() / ("ergon-pipeline-validate-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto args = two_pi4s();
  args.microbatches = 2;
  args.planner = "store-all";
  args.db = (dir / "lab.db").string();
  std::ostringstream out;
  EXPECT_EQ(run_pipeline(args, PipelineOutput{.json = true, .validate = true}, out), 0);
  const auto j = nlohmann::json::parse(out.str());
  ASSERT_EQ(j["boards"].size(), 2U);
  for (const auto& b : j["boards"]) {
    EXPECT_EQ(b["steps_arrived"], b["steps"]);
    EXPECT_GT(b["measured_busy_s"].get<double>(), 0);
  }
  EXPECT_GT(j["measured_makespan_s"].get<double>(), 0);
  EXPECT_EQ(j["incomplete"], "");
  // Only with --validate: ports, and executing on them.
  std::ostringstream ignored;
  EXPECT_THROW(run_pipeline(two_pi4s(), PipelineOutput{.ports = {"tcp:127.0.0.1:1"}}, ignored), InputError);
  EXPECT_THROW(run_pipeline(two_pi4s(), PipelineOutput{.validate = true, .execute = true}, ignored), InputError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ergon::cli
