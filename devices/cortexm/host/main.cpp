// ergon-firmware-host: the Cortex-M firmware's own code on a Linux host, over the host HAL,
// so it can be recorded (and tested in CI) without a board.

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <iostream>

#include "common/error.h"
#include "devices/cortexm/host/firmware_host.h"

namespace {
std::atomic<bool> g_stop{false};
}  // namespace

int main(int argc, char** argv) {
  using namespace ergon;
  CLI::App app{"ergon-firmware-host: the Cortex-M firmware's code on this machine (a simulated "
               "INA219 on the supply, a file for paging), for recording and tests without a board"};
  devices::cortexm::FirmwareHostOptions options;
  app.add_option("--board", options.board, "nrf52840 or mkr1000: its RAM, clock and supply")->capture_default_str();
  app.add_option("--link", options.link, "pty, a serial device, or tcp:HOST:PORT (listen)")->capture_default_str();
  bool no_monitor = false;
  app.add_flag("--no-monitor", no_monitor, "no INA219 on the supply lead: spans only");
  app.add_option("--storage", options.storage,
                 "paging storage: sd (a simulated SD card behind the firmware's SD driver) or file")
      ->capture_default_str();
  app.add_option("--storage-kib", options.storage_kib, "paging storage size, KiB")->capture_default_str();
  app.add_option("--scratch", options.scratch, "where the storage file goes")->capture_default_str();
  app.add_option("--link-bytes-per-s", options.link_bytes_per_s,
                 "the link's rate each way (a full-speed USB CDC link's, about 1 MB/s); 0: as fast as the pty")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  options.monitor = !no_monitor;
  options.on_listening = [](const std::string& l) {
    std::cout << l << std::endl;
    std::cerr << "ergon-firmware-host: waiting for ergon record --port " << l << std::endl;
  };
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  try {
    devices::cortexm::run_firmware_host(options, g_stop);
    return 0;
  } catch (const Error& e) {
    std::cerr << "ergon-firmware-host: " << e.what() << "\n";
    return 1;
  }
}
