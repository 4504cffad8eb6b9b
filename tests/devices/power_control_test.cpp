#include "devices/power_control.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "probes/nvml.h"

namespace ergon::devices {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ergon-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s << "\n";
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(PowerControl, CpufreqReadsAndSetsEveryCpusCeilingAsAPi4NamesItsModes) {
  TempDir sys("cpufreq");
  for (int cpu = 0; cpu < 4; ++cpu) {
    const fs::path d = sys.path() / "devices/system/cpu" / ("cpu" + std::to_string(cpu)) / "cpufreq";
    write(d / "scaling_available_frequencies", "600000 750000 1000000 1500000 ");
    write(d / "scaling_max_freq", "1500000");
  }
  write(sys.path() / "devices/system/cpu/cpufreq/policy0/scaling_max_freq", "1500000");  // not a cpuN
  auto c = cpufreq_control(sys.path());
  const ModeState s = c->state();
  EXPECT_EQ(s.current, "1500MHz");
  EXPECT_EQ(s.available, (std::vector<std::string>{"1500MHz", "1000MHz", "750MHz", "600MHz"}));
  const auto dry = c->set("600MHz", true);
  ASSERT_EQ(dry.size(), 4U);
  EXPECT_NE(dry[0].find("echo 600000 > "), std::string::npos) << dry[0];
  EXPECT_EQ(read(sys.path() / "devices/system/cpu/cpu0/cpufreq/scaling_max_freq"), "1500000") << "a dry run writes nothing";
  c->set("600MHz", false);
  for (int cpu = 0; cpu < 4; ++cpu)
    EXPECT_EQ(read(sys.path() / "devices/system/cpu" / ("cpu" + std::to_string(cpu)) / "cpufreq/scaling_max_freq"), "600000");
  EXPECT_EQ(c->state().current, "600MHz");
  EXPECT_THROW(c->set("2000MHz", false), InputError);
  EXPECT_THROW(cpufreq_control(sys.path() / "nothing")->state(), DeviceError);
}

class FakeRunner final : public CommandRunner {
 public:
  std::vector<std::vector<std::string>> calls;
  int mode = 0;
  bool deny = false;
  std::pair<int, std::string> run(const std::vector<std::string>& argv) override {
    calls.push_back(argv);
    if (argv.size() == 2 && argv[1] == "-q")
      return {0, std::string("NV Fan Mode:quiet\nNV Power Mode: ") + (mode == 0 ? "MAXN" : "MAXQ") + "\n" +
                     std::to_string(mode) + "\n"};
    if (deny) return {1, "NVPM ERROR: need root"};
    mode = std::stoi(argv.at(2));
    return {0, ""};
  }
};

TEST(PowerControl, NvpmodelListsTheConfiguredModesAndSwitchesByTheirIds) {
  TempDir dir("nvpmodel");
  write(dir.path() / "nvpmodel.conf",
        "< PARAM TYPE=FILE NAME=CPU_ONLINE >\n< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\n"
        "< POWER_MODEL ID=1 NAME=MAXQ >\n< POWER_MODEL ID=3 NAME=MAXP_CORE_ARM >");
  auto runner = std::make_shared<FakeRunner>();
  auto c = nvpmodel_control(runner, dir.path() / "nvpmodel.conf");
  const ModeState s = c->state();
  EXPECT_EQ(s.current, "MAXN");
  EXPECT_EQ(s.available, (std::vector<std::string>{"MAXN", "MAXQ", "MAXP_CORE_ARM"}));
  EXPECT_EQ(c->set("MAXQ", true), std::vector<std::string>{"nvpmodel -m 1"});
  EXPECT_EQ(runner->mode, 0) << "a dry run runs nothing";
  c->set("MAXQ", false);
  EXPECT_EQ(c->state().current, "MAXQ");
  EXPECT_THROW(c->set("TURBO", false), InputError);
  runner->deny = true;
  try {
    c->set("MAXN", false);
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("sudo"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nvpmodel_control(runner, dir.path() / "missing.conf")->state(), DeviceError);
}

TEST(PowerControl, NvmlPowerLimitsAreModesInWattsWithinTheBoardsRange) {
  auto nvml = probes::Nvml::open(FAKE_NVML_LIBRARY);
  auto c = nvml_control(nvml, 0);
  const ModeState s = c->state();
  EXPECT_EQ(s.current, "700W");
  ASSERT_GE(s.available.size(), 2U);
  EXPECT_EQ(s.available.front(), "700W");
  EXPECT_EQ(c->set("300W", true), std::vector<std::string>{"nvidia-smi -i 0 -pl 300"});
  EXPECT_EQ(c->state().current, "700W");
  c->set("300W", false);
  EXPECT_EQ(c->state().current, "300W");
  EXPECT_THROW(c->set("10W", false), InputError);
  EXPECT_THROW(c->set("fast", false), InputError);
  c->set("700W", false);
}

}  // namespace
}  // namespace ergon::devices
