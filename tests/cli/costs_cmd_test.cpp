// ergon attribute and ergon costs on a recorded run: the summary, and the costs as a table,
// JSON and CSV with their op shapes.

#include "cli/attribute_cmd.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "tests/support/recording_test.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;

class CostsCommand : public testing::RecordingTest {};

devices::SimServerOptions unpaced(uint64_t seed) { return devices::SimServerOptions{.speed = 0, .seed = seed}; }

TEST_F(CostsCommand, AttributedCostsListAsTableJsonAndCsvWithTheirOpShapes) {
  auto sim = devices::SimServer::open_pty(*devices::find_board("pi4"), unpaced(3));
  sim->start();
  const auto outcomes = record({sim->link_name()});
  sim->stop();
  ASSERT_EQ(outcomes[0].state, devices::SessionState::kCompleted) << outcomes[0].error;
  std::ostringstream summary;
  ASSERT_EQ(cli::run_attribute(db_path().string(), {*outcomes[0].run_id}, false, summary), 0);
  EXPECT_NE(summary.str().find("op costs stored"), std::string::npos) << summary.str();

  cli::CostsArgs args;
  args.db = db_path().string();
  args.json = true;
  std::ostringstream json_out;
  ASSERT_EQ(cli::run_costs(args, json_out), 0);
  const auto rows = nlohmann::json::parse(json_out.str());
  ASSERT_GE(rows.size(), 10U);
  int convs = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r["board_kind"], "pi4");
    EXPECT_GT(r["gross_energy_j"].get<double>(), r["net_energy_j"].get<double>());
    EXPECT_GT(r["net_energy_j"].get<double>(), 0);
    EXPECT_GE(r["sample_count"].get<int>(), 50);
    convs += r["kind"] == "conv2d" ? 1 : 0;
  }
  EXPECT_GE(convs, 2);

  args.json = false;
  args.csv = (dir_ / "costs.csv").string();
  std::ostringstream ignored;
  ASSERT_EQ(cli::run_costs(args, ignored), 0);
  std::ifstream csv(args.csv);
  std::string line;
  std::size_t lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, rows.size() + 1);  // header + one line per row

  args.csv.clear();
  args.board = "tx2";
  std::ostringstream none;
  ASSERT_EQ(cli::run_costs(args, none), 0);
  EXPECT_NE(none.str().find("no op costs for board tx2"), std::string::npos) << none.str();
}

}  // namespace
}  // namespace ergon
