#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "profiler/op.h"

namespace ergon::agent {

/// The --probe value that asks for no probe: spans only.
inline constexpr std::string_view kNoProbe = "none";

/// The board side of Ergon on a Linux board (Raspberry Pi 4, Jetson TX2), and on the host so
/// CI runs it: answers Hello and clock syncs, runs the profile plan or schedule it is sent
/// with real kernels and real paging, times each window, samples the board's power probe,
/// and streams spans and power batches. Survives the host disconnecting: a run in progress
/// stops, and the agent waits for the next host.
struct AgentOptions {
  /// "tcp:HOST:PORT" (listen; port 0 picks one), "pty" (a new pseudo-terminal), or a serial
  /// device ("/dev/ttyGS0", "/dev/ttyAMA0").
  std::string link = "tcp:0.0.0.0:7000";
  /// A probe spec (probes/probe.h); empty or kNoProbe: no power samples, spans only (time
  /// costs, their energy unknown).
  std::string probe;
  /// The board kind the Hello declares (pi4, tx2); empty: a Linux host (kind "host", no
  /// published profile; the host's --board may still name it).
  std::string board;
  /// Where the power-mode controls look: cpufreq under `sysfs_root`, or a Jetson's nvpmodel
  /// when `nvpmodel_conf` exists (tests point both at fakes).
  std::filesystem::path sysfs_root = "/sys";
  std::filesystem::path nvpmodel_conf = "/etc/nvpmodel.conf";
  /// Where page-outs go: a directory on the board's storage.
  std::filesystem::path scratch = std::filesystem::temp_directory_path();
  /// Called once listening, with what a host passes to `ergon record --port`.
  std::function<void(const std::string&)> on_listening;
  /// Called for every span the agent sends (tests compare them with what the host stored).
  std::function<void(uint32_t op_id, profiler::Phase phase, uint64_t begin_ns, uint64_t end_ns,
                     uint32_t repetitions)>
      on_span;
};

/// Runs until `stop` turns true. Throws DeviceError when the link or probe cannot be opened.
void run_agent(const AgentOptions& options, const std::atomic<bool>& stop);

/// The agent on a thread of this process (ergon validate --execute without a port, tests):
/// started and listening when constructed, stopped when destroyed. `options.on_listening` is
/// its own. Throws DeviceError when the agent cannot start.
class AgentThread {
 public:
  explicit AgentThread(AgentOptions options);
  ~AgentThread();
  AgentThread(const AgentThread&) = delete;
  AgentThread& operator=(const AgentThread&) = delete;
  /// What a host passes to ergon record --port.
  [[nodiscard]] const std::string& link() const { return link_; }

 private:
  AgentOptions options_;
  std::atomic<bool> stop_{false};
  std::mutex m_;
  std::condition_variable cv_;
  std::string link_, error_;
  std::thread thread_;
};

}  // namespace ergon::agent
