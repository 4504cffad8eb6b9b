// A planned pipeline run on simulated boards on real ptys, paced in real time, with
// activations and gradients relayed through the host's recorder as tagged link transfers
// (protocol v6), then predicted against measured per board and in total.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include <cstdio>

#include "app/pipeline.h"
#include "app/pipeline_run.h"
#include "common/error.h"
#include "costdb/database.h"
#include "tests/support/recording_test.h"

namespace ergon {
namespace {

using profiler::Phase;

app::PipelineArgs resnet18_on_two_pi4s(int microbatches) {
  app::PipelineArgs args;
  args.model = "resnet18-cifar";
  args.boards = {"pi4", "pi4"};
  args.microbatches = microbatches;
  args.planner = "store-all";
  args.time_limit_s = 30;
  return args;
}

// Every activation a board sends is received by the next board under the same tag and size,
// and every gradient comes back the same way: nothing waits for a transfer nobody sends.
TEST(PipelineBoardPlans, EveryTransferIsSentOnceAndReceivedOnceByTheNeighbour) {
  const auto o = app::plan_pipeline(resnet18_on_two_pi4s(4));
  const auto plans = app::pipeline_board_plans(o);
  ASSERT_EQ(plans.size(), 2U);
  // tag -> (sender stage, receiver stage, bytes)
  std::map<uint32_t, int> sent, received;
  std::map<uint32_t, uint32_t> bytes;
  for (std::size_t s = 0; s < plans.size(); ++s) {
    EXPECT_EQ(plans[s].ops.front().phase, Phase::kIdle) << "the idle power comes first";
    int computes = 0;
    for (const auto& op : plans[s].ops) {
      if (op.shape.kind != profiler::OpKind::kTransfer) {
        computes += op.phase == Phase::kIdle ? 0 : 1;
        continue;
      }
      const uint32_t tag = op.shape.dims[1];
      ASSERT_NE(tag, 0U);
      auto& side = op.phase == Phase::kLinkSend ? sent : received;
      EXPECT_EQ(side.count(tag), 0U) << "tag " << tag << " twice on one side";
      side[tag] = static_cast<int>(s);
      if (bytes.count(tag)) {
        EXPECT_EQ(bytes[tag], op.shape.dims[0]);
      }
      bytes[tag] = op.shape.dims[0];
    }
    EXPECT_GT(computes, 0);
  }
  EXPECT_EQ(sent.size(), 2U * 4U) << "an activation and a gradient per micro-batch";
  for (const auto& [tag, from] : sent) {
    ASSERT_TRUE(received.count(tag)) << "tag " << tag << " is never received";
    EXPECT_EQ(std::abs(received[tag] - from), 1) << "only neighbours exchange";
  }
  EXPECT_EQ(received.size(), sent.size());
  EXPECT_EQ(bytes[app::pipeline_transfer_tag(0, 0, false)], o.links[0].bytes);
}

class PipelineRun : public testing::RecordingTest {};

// What the planner predicts for a batch is what two simulated Pi 4s take when they run it:
// each board's compute within a few percent (their truth model's jitter and working set),
// and the makespan and energy with the relay's own delays on top.
TEST_F(PipelineRun, TwoSimulatedBoardsRunThePlannedPipelineAsPredicted) {
  app::PipelineRunRequest request;
  request.db = db_path().string();
  request.speed = 1;
  const auto r = app::run_pipeline(resnet18_on_two_pi4s(2), request);
  ASSERT_TRUE(r.incomplete.empty()) << r.incomplete;
  ASSERT_EQ(r.boards.size(), 2U);
  for (const auto& b : r.boards) {
    SCOPED_TRACE(b.run_id);
    EXPECT_EQ(b.steps_arrived, b.steps) << "every step's span arrived";
    EXPECT_NEAR(b.measured_busy_s / b.predicted_busy_s, 1.0, 0.03);
    ASSERT_TRUE(b.measured_dynamic_j);
    EXPECT_NEAR(*b.measured_dynamic_j / b.predicted_dynamic_j, 1.0, 0.05);
    EXPECT_GT(b.measured_transfer_s, 0);
  }
  EXPECT_NEAR(r.measured_makespan_s / r.predicted_makespan_s, 1.0, 0.10);
  ASSERT_TRUE(r.measured_energy_j);
  EXPECT_NEAR(*r.measured_energy_j / r.predicted_energy_j, 1.0, 0.10);
  // The runs are schedule runs: their steps never become costs to plan on.
  auto db = costdb::Database::open_read_only(db_path());
  for (const auto& run : costdb::list_runs(db)) EXPECT_EQ(run.plan, costdb::RunPlan::kSchedule);
}

/// An ergon-agent process on this machine, listening on a free loopback port.
class AgentProcess {
 public:
  AgentProcess() {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      const std::string agent = std::string(ERGON_BINARY_DIR) + "/agent/ergon-agent";
      ::execl(agent.c_str(), "ergon-agent", "--link", "tcp:127.0.0.1:0", "--board", "pi4", "--probe",
              "sim:ina219", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    // Its first line is the link to record from.
    char c = 0;
    while (::read(fds[0], &c, 1) == 1 && c != '\n') link_ += c;
    ::close(fds[0]);
  }
  ~AgentProcess() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;
  [[nodiscard]] const std::string& link() const { return link_; }

 private:
  pid_t pid_ = -1;
  std::string link_;
};

// The must-show of pipelines on real tensors: two ergon-agent processes over TCP, each
// executing its stage, the activations and gradients themselves relayed through the host;
// every stage's gradients over every micro-batch equal the whole model's store-all run in one
// process, bit for bit.
TEST_F(PipelineRun, TwoAgentProcessesOnRealTensorsGiveTheSingleProcessGradients) {
  AgentProcess a, b;
  ASSERT_EQ(a.link().rfind("tcp:", 0), 0U) << a.link();
  ASSERT_EQ(b.link().rfind("tcp:", 0), 0U) << b.link();
  app::PipelineRunRequest request;
  request.db = db_path().string();
  request.ports = {a.link(), b.link()};
  request.execute = true;
  const auto r = app::run_pipeline(resnet18_on_two_pi4s(2), request);
  ASSERT_TRUE(r.incomplete.empty()) << r.incomplete;
  ASSERT_EQ(r.gradients_equal.size(), 2U);
  for (const auto& g : r.gradients_equal) {
    ASSERT_TRUE(g.has_value()) << "each agent reports its gradients";
    EXPECT_TRUE(*g);
  }
  for (const auto& bd : r.boards) EXPECT_EQ(bd.steps_arrived, bd.steps);
  auto db = costdb::Database::open_read_only(db_path());
  for (const auto& run : costdb::list_runs(db)) EXPECT_EQ(run.plan, costdb::RunPlan::kExecute);
}

// The spelling, through the real binary and its option parser: ergon validate
// --pipeline runs the pipeline's validation and prints it as JSON.
TEST_F(PipelineRun, ErgonValidatePipelineRunsThePipelinesValidation) {
  const std::string ergon = std::string(ERGON_BINARY_DIR) + "/cli/ergon";
  const std::string cmd = ergon + " validate --model resnet18-cifar --pipeline pi4,pi4 --microbatches 2 --db '" +
                          db_path().string() + "' --json 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["boards"].size(), 2U);
  for (const auto& b : j["boards"]) EXPECT_EQ(b["steps_arrived"], b["steps"]);
  EXPECT_NEAR(j["measured_makespan_s"].get<double>() / j["predicted_makespan_s"].get<double>(), 1.0, 0.10);
}

// Simulated boards that do not follow real time cannot wait for each other.
TEST_F(PipelineRun, UnpacedSimulatedBoardsAreRefused) {
  app::PipelineRunRequest request;
  request.db = db_path().string();
  request.speed = 0;
  EXPECT_THROW((void)app::run_pipeline(resnet18_on_two_pi4s(2), request), InputError);
}

}  // namespace
}  // namespace ergon
