// A board Ergon has no built-in profile for, as a lab adds it: a descriptor file in a board
// folder, found by name by the real `ergon` binary when it plans and when it records the board
// (simulated from that same file on a pseudo-terminal).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "tests/support/command.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;

const fs::path kPi5 = fs::path(ERGON_TEST_DATA_DIR) / ".." / ".." / "boards" / "examples" / "pi5.json";

using Output = testing::CommandOutput;

class BoardFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ergon-boards-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "boards");
    fs::copy_file(kPi5, dir_ / "boards" / "pi5.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs `ergon ARGS` with the board folder on ERGON_BOARD_PATH.
  Output ergon(const std::string& args) const {
    const std::string command = "ERGON_BOARD_PATH='" + (dir_ / "boards").string() + "' '" + ERGON_BINARY_DIR +
                                "/cli/ergon' " + args + " 2>&1";
    return testing::run_shell(command);
  }

  fs::path dir_;
};

TEST_F(BoardFolder, ABoardInTheUserFolderIsPlannedForByItsName) {
  const Output out = ergon("plan --model mlp --board pi5 --budget 50% --json");
  ASSERT_EQ(out.status, 0) << out.text;
  const auto j = nlohmann::json::parse(out.text);
  EXPECT_EQ(j["graph"], "mlp batch 1 on pi5");
  EXPECT_EQ(j["costs"], "costs: the figures of pi5's descriptor " + (dir_ / "boards" / "pi5.json").string() + " (2400MHz)");
  EXPECT_LE(j["peak_bytes"].get<uint64_t>(), j["budget_bytes"].get<uint64_t>());
}

TEST_F(BoardFolder, ABrokenDescriptorIsRefusedInOneLineNamingItsField) {
  std::ifstream in(kPi5);
  auto doc = nlohmann::json::parse(in);
  doc["name"] = "pi6";
  doc["storage"]["pagein_bytes_per_s"] = "fast";
  std::ofstream(dir_ / "boards" / "pi6.json") << doc.dump(2);

  const Output out = ergon("plan --model mlp --board pi6 --budget 50%");
  EXPECT_NE(out.status, 0);
  EXPECT_EQ(out.text, "ergon: " + (dir_ / "boards" / "pi6.json").string() +
                          ": storage.pagein_bytes_per_s: expected a number > 0 (bytes/s), got \"fast\"\n");
  // The other boards stay usable.
  EXPECT_EQ(ergon("plan --model mlp --board pi5 --budget 50%").status, 0);
}

TEST_F(BoardFolder, TheRecorderKnowsADescribedBoardByTheNameItsHelloSays) {
  auto sim = devices::SimServer::open_pty(devices::board_named(kPi5.string()),
                                          devices::SimServerOptions{.speed = 0, .seed = 3});
  sim->start();
  const std::string db = (dir_ / "lab.db").string();
  const Output rec = ergon("record --port " + sim->link_name() + " --db '" + db + "'");
  ASSERT_EQ(rec.status, 0) << rec.text;
  EXPECT_NE(rec.text.find("completed (run 1)"), std::string::npos) << rec.text;
  const Output runs = ergon("runs --db '" + db + "'");
  EXPECT_NE(runs.text.find("pi5          pi5-sim        2400MHz       completed"), std::string::npos) << runs.text;
}

}  // namespace
}  // namespace ergon
