#include "devices/power_control.h"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "probes/nvml.h"

namespace ergon::devices {
namespace {

namespace fs = std::filesystem;

std::string read_first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

std::string mhz_name(long khz) { return std::to_string(khz / 1000) + "MHz"; }

class Cpufreq final : public PowerModeControl {
 public:
  explicit Cpufreq(fs::path root) : root_(std::move(root)) {}
  [[nodiscard]] std::string kind() const override { return "cpufreq"; }

  ModeState state() override {
    const auto cpus = policies();
    if (cpus.empty()) throw DeviceError("no cpufreq under " + root_.string() + " (a VM, or a kernel without it)");
    ModeState s;
    s.current = mhz_name(std::stol(read_first_line(cpus.front() / "scaling_max_freq")));
    std::set<long> khz;
    std::stringstream avail(read_first_line(cpus.front() / "scaling_available_frequencies"));
    for (long f = 0; avail >> f;) khz.insert(f);
    if (khz.empty()) {  // drivers without a list (intel_pstate): the range's ends
      khz.insert(std::stol(read_first_line(cpus.front() / "cpuinfo_min_freq")));
      khz.insert(std::stol(read_first_line(cpus.front() / "cpuinfo_max_freq")));
    }
    for (auto it = khz.rbegin(); it != khz.rend(); ++it) s.available.push_back(mhz_name(*it));
    return s;
  }

  std::vector<std::string> set(const std::string& mode, bool dry_run) override {
    const ModeState s = state();
    if (std::find(s.available.begin(), s.available.end(), mode) == s.available.end())
      throw InputError("cpufreq has no mode '" + mode + "' (it has " + join(s.available) + ")");
    const long khz = std::stol(mode) * 1000;
    std::vector<std::string> steps;
    for (const auto& cpu : policies()) {
      const fs::path file = cpu / "scaling_max_freq";
      steps.push_back("echo " + std::to_string(khz) + " > " + file.string());
      if (dry_run) continue;
      std::ofstream out(file);
      out << khz << "\n";
      out.flush();
      if (!out)
        throw DeviceError("cannot write " + file.string() + ": " + std::strerror(errno) +
                          " (setting the CPU ceiling needs root: sudo ergon power-mode --set " + mode + ")");
    }
    return steps;
  }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  }
  std::vector<fs::path> policies() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / "devices" / "system" / "cpu", ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("cpu", 0) == 0 && name.size() > 3 && std::isdigit(static_cast<unsigned char>(name[3])) &&
          fs::exists(e.path() / "cpufreq" / "scaling_max_freq"))
        out.push_back(e.path() / "cpufreq");
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path root_;
};

class Nvpmodel final : public PowerModeControl {
 public:
  Nvpmodel(std::shared_ptr<CommandRunner> runner, fs::path conf) : runner_(std::move(runner)), conf_(std::move(conf)) {}
  [[nodiscard]] std::string kind() const override { return "nvpmodel"; }

  ModeState state() override {
    ModeState s;
    for (const auto& [id, name] : modes()) s.available.push_back(name);
    const auto [status, out] = runner_->run({"nvpmodel", "-q"});
    if (status != 0) throw DeviceError("nvpmodel -q failed (status " + std::to_string(status) + "): " + out);
    std::smatch m;
    if (!std::regex_search(out, m, std::regex(R"(NV Power Mode:\s*(\S+))")))
      throw DeviceError("cannot read the mode from nvpmodel -q: " + out);
    s.current = m[1];
    return s;
  }

  std::vector<std::string> set(const std::string& mode, bool dry_run) override {
    for (const auto& [id, name] : modes()) {
      if (name != mode) continue;
      const std::vector<std::string> argv{"nvpmodel", "-m", std::to_string(id)};
      const std::string line = "nvpmodel -m " + std::to_string(id);
      if (!dry_run) {
        const auto [status, out] = runner_->run(argv);
        if (status != 0)
          throw DeviceError(line + " failed (status " + std::to_string(status) + "): " + out +
                            " (nvpmodel needs root: sudo ergon power-mode --set " + mode + ")");
      }
      return {line};
    }
    std::string known;
    for (const auto& [id, name] : modes()) known += (known.empty() ? "" : ", ") + name;
    throw InputError("nvpmodel has no mode '" + mode + "' (it has " + known + ")");
  }

 private:
  std::vector<std::pair<int, std::string>> modes() const {
    std::ifstream in(conf_);
    if (!in) throw DeviceError("cannot read " + conf_.string() + " (not a Jetson?)");
    std::vector<std::pair<int, std::string>> out;
    const std::regex model(R"(<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=(\S+?)\s*>)");
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, model)) out.emplace_back(std::stoi(m[1]), m[2]);
    }
    if (out.empty()) throw DeviceError(conf_.string() + " lists no POWER_MODEL");
    return out;
  }
  std::shared_ptr<CommandRunner> runner_;
  fs::path conf_;
};

class NvmlLimit final : public PowerModeControl {
 public:
  NvmlLimit(std::shared_ptr<probes::Nvml> nvml, unsigned gpu) : nvml_(std::move(nvml)), gpu_(gpu) {}
  [[nodiscard]] std::string kind() const override { return "nvml"; }

  ModeState state() override {
    ModeState s;
    s.current = watts(nvml_->power_limit_w(gpu_));
    const auto [lo, hi] = nvml_->power_limit_range_w(gpu_);
    // The board's range in quarters: enough points for a sweep; any limit inside is accepted.
    for (int q = 4; q >= 0; --q) {
      const std::string w = watts(lo + (hi - lo) * q / 4);
      if (s.available.empty() || s.available.back() != w) s.available.push_back(w);
    }
    return s;
  }

  std::vector<std::string> set(const std::string& mode, bool dry_run) override {
    char* end = nullptr;
    const double w = std::strtod(mode.c_str(), &end);
    if (end == mode.c_str() || std::string(end) != "W" || !(w > 0))
      throw InputError("a GPU power limit is in watts, like 150W, not '" + mode + "'");
    const auto [lo, hi] = nvml_->power_limit_range_w(gpu_);
    if (w < lo || w > hi)
      throw InputError("GPU " + std::to_string(gpu_) + " takes limits from " + watts(lo) + " to " + watts(hi));
    const std::string line = "nvidia-smi -i " + std::to_string(gpu_) + " -pl " + watts(w).substr(0, watts(w).size() - 1);
    if (!dry_run) nvml_->set_power_limit_w(gpu_, w);
    return {line};
  }

 private:
  static std::string watts(double w) { return std::to_string(static_cast<long>(std::lround(w))) + "W"; }
  std::shared_ptr<probes::Nvml> nvml_;
  unsigned gpu_;
};

class PopenRunner final : public CommandRunner {
 public:
  std::pair<int, std::string> run(const std::vector<std::string>& argv) override {
    std::string cmd;
    for (const auto& a : argv) {
      // Single-quoted for the shell; a quote inside ends the quoting, is escaped, resumes it.
      cmd += cmd.empty() ? "'" : " '";
      for (char c : a) cmd += c == '\'' ? std::string("'\\''") : std::string(1, c);
      cmd += '\'';
    }
    cmd += " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) throw DeviceError("cannot run " + argv.front() + ": " + std::strerror(errno));
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }
};

}  // namespace

std::unique_ptr<CommandRunner> system_command_runner() { return std::make_unique<PopenRunner>(); }

std::unique_ptr<PowerModeControl> cpufreq_control(const fs::path& sysfs_root) {
  return std::make_unique<Cpufreq>(sysfs_root);
}

std::unique_ptr<PowerModeControl> nvpmodel_control(std::shared_ptr<CommandRunner> runner, const fs::path& conf) {
  return std::make_unique<Nvpmodel>(std::move(runner), conf);
}

std::unique_ptr<PowerModeControl> nvml_control(std::shared_ptr<probes::Nvml> nvml, unsigned gpu) {
  return std::make_unique<NvmlLimit>(std::move(nvml), gpu);
}

FoundControls find_power_controls(const fs::path& sysfs_root) {
  FoundControls f;
  auto add = [&](std::unique_ptr<PowerModeControl> c) {
    try {
      (void)c->state();
      f.controls.push_back(std::move(c));
    } catch (const Error& e) {
      f.absent.push_back(c->kind() + ": " + e.what());
    }
  };
  add(cpufreq_control(sysfs_root));
  if (fs::exists("/etc/nvpmodel.conf")) add(nvpmodel_control(system_command_runner()));
  else f.absent.push_back("nvpmodel: no /etc/nvpmodel.conf (not a Jetson)");
  try {
    auto nvml = probes::Nvml::open();
    for (unsigned g = 0; g < nvml->device_count(); ++g) add(nvml_control(nvml, g));
  } catch (const Error& e) {
    f.absent.push_back(std::string("nvml: ") + e.what());
  }
  return f;
}

std::string phase_switch_line(std::size_t entry, const std::string& mode) {
  return "backward phase from entry " + std::to_string(entry) + " in " + mode;
}

std::string phase_switch_line(std::size_t entry, const std::string& mode, uint64_t switch_ns) {
  char took[48];
  std::snprintf(took, sizeof took, " (switched in %.3f ms)", static_cast<double>(switch_ns) * 1e-6);
  return phase_switch_line(entry, mode) + took;
}

}  // namespace ergon::devices
