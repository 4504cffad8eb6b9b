// Link costs (protocol v6): a board's transfers to and from the host, timed by the board,
// stored, fitted into link_costs and used by the pipeline planner. Simulated boards on real
// ptys (their link's time and power from the truth model's published figures) and the real
// agent over real TCP.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>

#include "agent/agent.h"
#include "app/attribute.h"
#include "app/pipeline.h"
#include "app/record.h"
#include "common/error.h"
#include "costdb/cost_model.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/link_profile.h"
#include "devices/sim_server.h"
#include "devices/truth_model.h"
#include "tests/support/recording_test.h"

namespace ergon {
namespace {

using profiler::Phase;

class LinkTest : public testing::RecordingTest {
 protected:
  /// ergon record --link-test on `port` (link kind `link`; empty: the default), then ergon
  /// attribute: the board's link fits.
  std::vector<costdb::LinkCostFit> measure(const std::string& port, const std::string& link) {
    app::RecordRequest req;
    req.ports = {port};
    req.db_path = db_path();
    req.options.link_test = true;
    req.options.link = link;
    std::atomic<int> interrupts{0};
    const auto outcomes = app::record_boards(req, {}, interrupts);
    EXPECT_EQ(outcomes.size(), 1U);
    if (outcomes.empty()) return {};
    EXPECT_EQ(outcomes[0].state, devices::SessionState::kCompleted) << outcomes[0].error;
    if (!outcomes[0].run_id) return {};
    auto db = costdb::Database::open(db_path());
    const auto attributed = app::attribute_run(db, *outcomes[0].run_id);
    EXPECT_EQ(attributed.link_rows, 6) << "three sizes each way";
    return costdb::list_link_costs(db, std::nullopt);
  }
};

struct SimCase {
  const char* board;
  const char* link;
};

class SimulatedLink : public LinkTest, public ::testing::WithParamInterface<SimCase> {};

// What a lab measures with --link-test is what the link is: the simulated board's link runs at
// its published rate (LinkData frames' header, CRC and COBS included) with a round trip per
// transfer, drawing the published (or the simulator's own) power above idle.
TEST_P(SimulatedLink, TheMeasuredRateLatencyAndEnergyPerByteAreTheLinksOwn) {
  const auto board = *devices::find_board(GetParam().board);
  const auto link = devices::link_named(GetParam().link);
  auto sim = devices::SimServer::open_pty(board, {.speed = 0, .seed = 3, .link = GetParam().link});
  sim->start();
  const auto fits = measure(sim->link_name(), GetParam().link);
  sim->stop();
  ASSERT_EQ(fits.size(), 2U);
  // Payload bytes per wire byte of a full LinkData frame: what the fitted rate is made of.
  const double payload_share = static_cast<double>(1 << 20) / static_cast<double>(devices::link_wire_bytes(1 << 20));
  for (const auto& f : fits) {
    SCOPED_TRACE(f.direction);
    EXPECT_EQ(f.board_kind, GetParam().board);
    EXPECT_EQ(f.link, GetParam().link);
    EXPECT_NEAR(f.bandwidth_bytes_per_s / (link.bytes_per_s * payload_share), 1.0, 0.02);
    EXPECT_NEAR(f.latency_s / link.latency_s, 1.0, 0.2);
    const double link_w = devices::transfer_truth_cost(board, link, 1 << 20,
                                                       f.direction == "send" ? Phase::kLinkSend : Phase::kLinkReceive)
                              .power_w -
                          board.idle_w;
    ASSERT_TRUE(f.energy_j_per_byte) << "the board's power monitor covered its transfers";
    EXPECT_NEAR(*f.energy_j_per_byte / (link_w / (link.bytes_per_s * payload_share)), 1.0, 0.08);
  }
}

INSTANTIATE_TEST_SUITE_P(Boards, SimulatedLink,
                         ::testing::Values(SimCase{"pi4", "ethernet"}, SimCase{"nrf52840", "usb-cdc"}),
                         [](const auto& p) { return std::string(p.param.board); });

// The pipeline planner prices a link from what was measured, and says so; with both ends
// measured with power, its energy is no longer a lower bound.
TEST_F(LinkTest, ThePipelinePlannerUsesTheMeasuredLinkAndItsEnergy) {
  auto sim = devices::SimServer::open_pty(*devices::find_board("pi4"), {.speed = 0, .seed = 5});
  sim->start();
  const auto fits = measure(sim->link_name(), "");  // the default: the pi4's ethernet
  sim->stop();
  ASSERT_EQ(fits.size(), 2U);
  EXPECT_EQ(fits[0].link, "ethernet");

  app::PipelineArgs args;
  args.model = "resnet18-cifar";
  args.boards = {"pi4", "pi4"};
  args.microbatches = 2;
  args.planner = "store-all";
  args.time_limit_s = 30;
  const auto published = app::plan_pipeline(args);
  EXPECT_FALSE(published.missing_link_energy.empty()) << "ethernet's energy per byte is not published";

  args.db = db_path().string();
  const auto measured = app::plan_pipeline(args);
  ASSERT_EQ(measured.links.size(), 1U);
  EXPECT_TRUE(measured.missing_link_energy.empty());
  ASSERT_TRUE(measured.links[0].energy_j_per_byte);
  EXPECT_NEAR(*measured.links[0].energy_j_per_byte, *fits[0].energy_j_per_byte + *fits[1].energy_j_per_byte,
              0.5 * (*fits[0].energy_j_per_byte + *fits[1].energy_j_per_byte));
  EXPECT_TRUE(std::any_of(measured.links[0].sources.begin(), measured.links[0].sources.end(),
                          [](const std::string& s) { return s.starts_with("measured: pi4 send over ethernet"); }));
  EXPECT_GT(measured.prediction.link_j, 0);
}

// A link kind nothing publishes is refused until it is measured, with the command to measure it.
TEST_F(LinkTest, AnUnpublishedLinkKindNeedsAMeasurement) {
  app::PipelineArgs args;
  args.model = "mlp";
  args.boards = {"pi4", "pi4"};
  args.links = {"wifi"};
  args.planner = "store-all";
  try {
    (void)app::plan_pipeline(args);
    ADD_FAILURE() << "a link nothing says anything of cannot be priced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ergon record --link-test --link-kind wifi"), std::string::npos) << e.what();
  }
}

// The real agent on this machine, over real TCP, with no power monitor: the link's rate and
// latency are measured and its energy is unknown, never zero.
TEST_F(LinkTest, TheAgentMeasuresARealTcpLinkInTimeOnly) {
  agent::AgentOptions options;
  options.link = "tcp:127.0.0.1:0";
  options.probe = std::string(agent::kNoProbe);
  options.scratch = dir_;
  agent::AgentThread agent(options);
  const auto fits = measure(agent.link(), "loopback");
  ASSERT_EQ(fits.size(), 2U);
  for (const auto& f : fits) {
    SCOPED_TRACE(f.direction);
    EXPECT_EQ(f.board_kind, "host");
    EXPECT_EQ(f.link, "loopback");
    EXPECT_GT(f.bandwidth_bytes_per_s, 1e6) << "loopback TCP moves far more than a MB/s";
    EXPECT_LT(f.latency_s, 0.05);
    EXPECT_FALSE(f.energy_j_per_byte) << "no power monitor: energy unknown";
  }
}

}  // namespace
}  // namespace ergon
