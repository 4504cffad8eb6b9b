// ergon-firmware-host: the Cortex-M firmware's own code on a Linux host, over the host HAL,
// so it can be recorded (and tested in CI) without a board: a simulated INA219 on the
// board's supply lead, whose current follows what the firmware is doing, and a file for
// paging.

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "devices/board_profile.h"
#include "devices/cortexm/firmware.h"
#include "devices/cortexm/host/host_hal.h"
#include "devices/link_server.h"
#include "probes/sim_ina2xx.h"

namespace {

std::atomic<bool> g_stop{false};

}  // namespace

int main(int argc, char** argv) {
  using namespace ergon;
  using namespace ergon::devices;
  CLI::App app{"ergon-firmware-host: the Cortex-M firmware's code on this machine, for recording "
               "and tests without a board"};
  std::string board_name = "nrf52840";
  std::string link = "pty";
  bool no_monitor = false;
  uint32_t storage_kib = 1024;
  std::filesystem::path scratch = std::filesystem::temp_directory_path();
  app.add_option("--board", board_name, "nrf52840 or mkr1000: its RAM, clock and supply")->capture_default_str();
  app.add_option("--link", link, "pty, a serial device, or tcp:HOST:PORT (listen)")->capture_default_str();
  app.add_flag("--no-monitor", no_monitor, "no INA219 on the supply lead: spans only");
  app.add_option("--storage-kib", storage_kib, "paging storage (a file), KiB")->capture_default_str();
  app.add_option("--scratch", scratch, "where the storage file goes")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const auto board = find_board(board_name);
    if (!board || board->ram_bytes >= (1U << 20))
      throw InputError("--board: nrf52840 or mkr1000, not '" + board_name + "'");
    std::signal(SIGINT, [](int) { g_stop = true; });
    std::signal(SIGTERM, [](int) { g_stop = true; });

    cortexm::HostClock clock(board->tick_hz);
    SteadyClock steady;
    const cortexm::Firmware* live = nullptr;  // the supply follows the firmware serving now
    probes::SimIna2xx chip(
        probes::Ina2xxChip::kIna219, board->ina219.shunt_ohm,
        [&](int64_t) {
          double w = board->idle_w;
          if (live != nullptr && live->activity() == cortexm::Firmware::Activity::kComputing) w += board->compute_w;
          if (live != nullptr && live->activity() == cortexm::Firmware::Activity::kPaging) w += board->storage_w;
          const SupplyReading s = supply_reading(*board, w);
          return probes::SupplyState{.bus_v = s.bus_v, .current_a = s.current_a};
        },
        board->shunt_noise_v);
    probes::SimI2cBus bus(steady);
    bus.attach(0x40, chip);
    cortexm::HostI2c i2c(bus);
    cortexm::FileBlockDevice storage(scratch / ("ergon-firmware-" + std::to_string(::getpid()) + ".blk"), 512,
                                     storage_kib * 2);
    // The firmware's RAM less what its own buffers take (about 12 KiB): the tensors' arena.
    std::vector<uint8_t> arena(board->ram_bytes - 12 * 1024);
    const cortexm::Ina219Config ina{
        .address = 0x40,
        .shunt_milliohm = static_cast<uint32_t>(board->ina219.shunt_ohm * 1000 + 0.5),
        .max_current_ma = static_cast<uint32_t>(board->ina219.current_lsb_a * 32768 * 1000 + 0.5)};
    const cortexm::BoardInfo info{.kind = board->kind,
                                  .name = board->name.data(),
                                  .firmware_version = board->firmware_version,
                                  .ram_bytes = static_cast<uint32_t>(board->ram_bytes),
                                  .rail_name = board->rail_name.data()};
    serve_link(
        link, g_stop,
        [](const std::string& l) {
          std::cout << l << std::endl;
          std::cerr << "ergon-firmware-host: waiting for ergon record --port " << l << std::endl;
        },
        [&](int fd) {
          cortexm::FdLink byte_link(fd);
          const cortexm::Hal hal{.link = byte_link, .clock = clock, .i2c = &i2c, .storage = &storage};
          cortexm::Firmware firmware(info, hal, no_monitor ? nullptr : &ina, arena.data(), arena.size());
          live = &firmware;
          if (!firmware.start()) std::cerr << "ergon-firmware-host: the INA219 does not answer\n";
          while (!g_stop && !byte_link.broken()) {
            firmware.poll();
            if (!firmware.running()) std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
          live = nullptr;
          ::close(fd);
        });
    return 0;
  } catch (const Error& e) {
    std::cerr << "ergon-firmware-host: " << e.what() << "\n";
    return 1;
  }
}
