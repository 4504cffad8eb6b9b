// `ergon probe read --probe nvml:LIBRARY` through the real binary, on the fake NVML library
// (tests/probes/fake_nvml.cpp: two GPUs drawing 450 W, an energy counter that moves every
// 100 ms as an H100's did): the samples, the source the probe says it read, and the run stored.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/command.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;

using testing::CommandOutput;

CommandOutput ergon(const std::string& env, const std::string& args) {
  return testing::run_shell(env + " '" + ERGON_BINARY_DIR + "/cli/ergon' " + args + " 2>&1");
}

/// The mean power `probe read` prints ("mean 450.0000 W").
double mean_w(const std::string& text) {
  const auto at = text.rfind("mean ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + 5));
}

TEST(NvmlProbeRead, SamplesTheEnergyCounterBetweenItsStepsAndStoresTheRun) {
  const fs::path db = fs::temp_directory_path() / ("ergon-nvml-" + std::to_string(::getpid()) + ".db");
  fs::remove(db);
  const CommandOutput out = ergon("FAKE_NVML_REAL_TIME=1", std::string("probe read --probe nvml:") + FAKE_NVML_LIBRARY +
                                                        " --duration 1.5s --db '" + db.string() + "'");
  ASSERT_EQ(out.status, 0) << out.text;
  // The counter's period as timed in real time on a busy machine: 100 ms within a few.
  const std::string said = "nvml at NVML energy counter, the mean between its steps, moving every ";
  const auto at = out.text.find(said);
  ASSERT_NE(at, std::string::npos) << out.text;
  EXPECT_NEAR(std::stod(out.text.substr(at + said.size())), 100, 5) << out.text;
  // 450 W, whatever the poll's few milliseconds of lateness do to each step's length.
  EXPECT_NEAR(mean_w(out.text), 450, 450 * 0.05) << out.text;
  EXPECT_NE(out.text.find("stored as run 1"), std::string::npos) << out.text;
  fs::remove(db);
}

TEST(NvmlProbeRead, ACounterThatDoesNotMoveFallsBackToInstantPowerOrIsRefusedByName) {
  // Without FAKE_NVML_REAL_TIME the fake's time stands still, and so does its counter.
  const std::string probe = std::string("probe read --probe nvml:") + FAKE_NVML_LIBRARY;
  const CommandOutput instant = ergon("", probe + " --duration 0.3s");
  ASSERT_EQ(instant.status, 0) << instant.text;
  EXPECT_NE(instant.text.find("nvml at NVML instant power"), std::string::npos) << instant.text;
  EXPECT_DOUBLE_EQ(mean_w(instant.text), 450) << instant.text;
  const CommandOutput refused = ergon("", probe + ",source=energy --duration 0.3s");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.text.find("ergon: NVML: the energy counter of GPU 0 has not moved for 1 s"), std::string::npos)
      << refused.text;
}

}  // namespace
}  // namespace ergon
