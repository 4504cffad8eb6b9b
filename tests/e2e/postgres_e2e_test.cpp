// A lab's shared database, end to end: real `ergon record` processes on simulated boards
// (real pseudo-terminals) writing into a real PostgreSQL server the test starts, while the
// test kills a recorder or restarts the server under them.

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "costdb/costs.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "tests/support/postgres_server.h"

namespace ergon {
namespace {

using testing::PostgresServer;

/// `ergon ARGS...` as a child process whose stdout (and stderr) the test reads line by line.
class ErgonProcess {
 public:
  explicit ErgonProcess(const std::vector<std::string>& args) {
    int out[2];
    if (::pipe(out) != 0) return;
    const std::string ergon = std::string(ERGON_BINARY_DIR) + "/cli/ergon";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(out[1], STDERR_FILENO);
      ::close(out[0]);
      std::vector<char*> argv{const_cast<char*>("ergon")};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(ergon.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
  }
  ErgonProcess(const ErgonProcess&) = delete;
  ErgonProcess& operator=(const ErgonProcess&) = delete;
  ~ErgonProcess() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (out_ != nullptr) std::fclose(out_);
  }

  /// Reads lines until one matches; returns its first group (empty at end of output).
  std::string read_until(const std::regex& re) {
    char line[4096];
    while (out_ != nullptr && std::fgets(line, sizeof line, out_) != nullptr) {
      output_ += line;
      std::cmatch m;
      if (std::regex_search(line, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    }
    return {};
  }
  /// Reads the rest of the output and waits; the exit status (-signal when killed).
  int finish() {
    read_until(std::regex("$^"));
    return wait();
  }
  void kill_hard() { ::kill(pid_, SIGKILL); }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  [[nodiscard]] const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string output_;
  bool waited_ = false;
};

class SharedDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& server = PostgresServer::shared();
    ASSERT_TRUE(server.available()) << "PostgreSQL: " << server.why_not();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    db_name_ = "e2e_" + name.substr(0, 50);
    locator_ = server.create_database(db_name_);
  }

  /// Every sample and span of the database stored once: no (run, rowid) twice.
  void expect_no_duplicate_rows() const {
    auto& server = PostgresServer::shared();
    EXPECT_EQ(server.query("SELECT count(*) - count(DISTINCT (run_id, rowid)) FROM power_samples", db_name_), "0");
    EXPECT_EQ(server.query("SELECT count(*) - count(DISTINCT rowid) FROM op_spans", db_name_), "0");
  }

  std::string db_name_;
  std::string locator_;
};

TEST_F(SharedDatabase, FourRecordersOfFourBoardsEachStoreEverySampleAndSpanExactlyOnce) {
  constexpr int kRecorders = 4;
  constexpr int kBoardsEach = 4;
  const std::vector<std::string> kinds{"pi4", "tx2", "nrf52840", "mkr1000"};
  std::vector<std::unique_ptr<devices::SimServer>> sims;
  std::vector<std::unique_ptr<ErgonProcess>> recorders;
  for (int r = 0; r < kRecorders; ++r) {
    std::vector<std::string> args{"record", "--db", locator_, "--loops", "1", "--seed", std::to_string(r + 1)};
    for (int b = 0; b < kBoardsEach; ++b) {
      sims.push_back(devices::SimServer::open_pty(*devices::find_board(kinds[static_cast<std::size_t>(b)]),
                                                  devices::SimServerOptions{.speed = 0, .seed = static_cast<uint64_t>(r * 10 + b)}));
      sims.back()->start();
      args.push_back("--port");
      args.push_back(sims.back()->link_name());
    }
    recorders.push_back(std::make_unique<ErgonProcess>(args));
  }
  for (auto& recorder : recorders) EXPECT_EQ(recorder->finish(), 0) << recorder->output();
  for (auto& sim : sims) sim->stop();

  auto db = costdb::Database::open_read_only(locator_);
  const auto runs = costdb::list_runs(db);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kRecorders * kBoardsEach));
  std::set<int64_t> ids;
  for (const auto& run : runs) {
    ids.insert(run.id);
    EXPECT_EQ(run.status, costdb::RunStatus::kCompleted) << run.id;
    ASSERT_TRUE(run.counters.device_samples_sent && run.counters.device_spans_sent) << run.id;
    EXPECT_EQ(run.samples, *run.counters.device_samples_sent) << "run " << run.id << " " << run.board_kind;
    EXPECT_EQ(run.spans, *run.counters.device_spans_sent) << "run " << run.id << " " << run.board_kind;
    EXPECT_GT(run.samples, 0U);
  }
  EXPECT_EQ(ids.size(), runs.size());
  expect_no_duplicate_rows();
  // The four recorders met on the same four boards (kind, name) and shared their rows.
  EXPECT_EQ(PostgresServer::shared().query("SELECT count(*) FROM boards", db_name_), "4");
}

/// Starts `ergon record` on a real-time simulated Pi 4 until killed, and waits for two commits
/// with data; returns the samples it said were committed.
uint64_t record_until_two_commits(ErgonProcess& recorder) {
  const std::regex committed("committed ([0-9]+)");
  uint64_t samples = 0;
  for (int reports = 0; reports < 2;) {
    const std::string n = recorder.read_until(committed);
    if (n.empty()) break;
    if (std::stoull(n) > 0) {
      samples = std::stoull(n);
      ++reports;
    }
  }
  return samples;
}

TEST_F(SharedDatabase, AKilledRecorderLeavesItsCommittedRowsAndItsRunReadsInterrupted) {
  auto sim = devices::SimServer::open_pty(*devices::find_board("pi4"), devices::SimServerOptions{.speed = 1, .seed = 5});
  sim->start();
  ErgonProcess recorder({"record", "--port", sim->link_name(), "--db", locator_, "--loops", "0"});
  const uint64_t committed = record_until_two_commits(recorder);
  ASSERT_GT(committed, 0U) << recorder.output();
  recorder.kill_hard();
  EXPECT_EQ(recorder.wait(), -SIGKILL);
  sim->stop();

  auto db = costdb::Database::open_read_only(locator_);
  const auto runs = costdb::list_runs(db);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_GE(runs[0].samples, committed);
  EXPECT_EQ(runs[0].status, costdb::RunStatus::kInterrupted);
  expect_no_duplicate_rows();
  // What is there is whole: the run's data loads and its samples are in time order.
  EXPECT_EQ(costdb::load_run_data(db, runs[0].id).samples.size(), runs[0].samples);
}

TEST_F(SharedDatabase, AServerRestartMidIngestEndsTheRunWithTheReasonAndNoDuplicateRows) {
  auto sim = devices::SimServer::open_pty(*devices::find_board("pi4"), devices::SimServerOptions{.speed = 1, .seed = 6});
  sim->start();
  ErgonProcess recorder({"record", "--port", sim->link_name(), "--db", locator_, "--loops", "0"});
  const uint64_t committed = record_until_two_commits(recorder);
  ASSERT_GT(committed, 0U) << recorder.output();
  ASSERT_TRUE(PostgresServer::shared().restart());
  const int status = recorder.finish();
  sim->stop();
  EXPECT_NE(status, 0) << recorder.output();
  EXPECT_NE(recorder.output().find("lost the connection to the server"), std::string::npos) << recorder.output();

  auto db = costdb::Database::open_read_only(locator_);
  const auto runs = costdb::list_runs(db);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].status, costdb::RunStatus::kFailed);
  EXPECT_GE(runs[0].samples, committed);
  const auto events = costdb::list_events(db, runs[0].id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, "failed");
  EXPECT_NE(events.back().text.find("the recorder lost the database"), std::string::npos) << events.back().text;
  expect_no_duplicate_rows();
}

/// `ergon ARGS...` to completion: (exit status, output).
std::pair<int, std::string> ergon_run(const std::vector<std::string>& args) {
  ErgonProcess process(args);
  const int status = process.finish();
  return {status, process.output()};
}

// The demo (record four boards, attribute, fit, plan, sweep, validate) on the shared database,
// then every read command on it (the demo itself plans, sweeps and validates on it); the same
// database copied into a file reads the same.
TEST_F(SharedDatabase, EveryCommandWorksOnTheSharedDatabaseAsOnAFile) {
  const auto [demo, demo_out] = ergon_run({"demo", "--db", locator_});
  ASSERT_EQ(demo, 0) << demo_out;
  // In a folder of its own: read-only connections leave the file's -wal and -shm beside it.
  std::string folder = (std::filesystem::temp_directory_path() / "ergon-pg-e2e-XXXXXX").string();
  ASSERT_NE(::mkdtemp(folder.data()), nullptr);
  const std::string file = folder + "/copy.db";
  const auto [copied, copy_out] = ergon_run({"copy", "--from", locator_, "--to", file});
  ASSERT_EQ(copied, 0) << copy_out;
  EXPECT_NE(copy_out.find("copied 5 runs"), std::string::npos) << copy_out;

  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"runs"}, {"costs", "--board", "pi4"}, {"report", "--run", "1"},
        {"plan", "--model", "mlp", "--board", "pi4", "--budget", "50%"}}) {
    std::vector<std::string> on_pg = command;
    on_pg.insert(on_pg.end(), {"--db", locator_});
    std::vector<std::string> on_file = command;
    on_file.insert(on_file.end(), {"--db", file});
    const auto [pg_status, pg_out] = ergon_run(on_pg);
    const auto [file_status, file_out] = ergon_run(on_file);
    EXPECT_EQ(pg_status, 0) << command[0] << ": " << pg_out;
    EXPECT_EQ(file_status, 0) << command[0] << ": " << file_out;
    if (command[0] == "costs" || command[0] == "runs") {
      EXPECT_EQ(pg_out, file_out) << command[0];  // the same rows, to the digit
    }
  }
  const std::string shots = file + ".png";
  const auto [dash, dash_out] = ergon_run({"dashboard", "--db", locator_, "--screenshots", shots});
  EXPECT_EQ(dash, 0) << dash_out;
  EXPECT_NE(dash_out.find("pareto"), std::string::npos) << dash_out;
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
}

}  // namespace
}  // namespace ergon
