#include "devices/cortexm/host/firmware_host.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "devices/board_profile.h"
#include "devices/cortexm/firmware.h"
#include "devices/cortexm/host/host_hal.h"
#include "devices/cortexm/host/sim_sd_card.h"
#include "devices/cortexm/sd_card.h"
#include "devices/link_server.h"
#include "probes/sim_ina2xx.h"

namespace ergon::devices::cortexm {
namespace {
int next_instance() {
  static std::atomic<int> n{0};
  return n++;
}
}  // namespace

void run_firmware_host(const FirmwareHostOptions& options, const std::atomic<bool>& stop) {
  const auto board = find_board(options.board);
  if (!board || board->ram_bytes >= (1U << 20))
    throw InputError("--board: nrf52840 or mkr1000, not '" + options.board + "'");
  HostClock clock(board->tick_hz);
  SteadyClock steady;
  const Firmware* live = nullptr;  // the supply follows the firmware serving now
  probes::SimIna2xx chip(
      probes::Ina2xxChip::kIna219, board->ina219.shunt_ohm,
      [&](int64_t) {
        double w = board->idle_w;
        const auto activity = live != nullptr ? live->activity() : Firmware::Activity::kIdle;
        if (activity == Firmware::Activity::kComputing) w += board->compute_w;
        if (activity == Firmware::Activity::kPaging) w += board->storage_w;
        const SupplyReading s = supply_reading(*board, w);
        return probes::SupplyState{.bus_v = s.bus_v, .current_a = s.current_a};
      },
      board->shunt_noise_v);
  probes::SimI2cBus bus(steady);
  bus.attach(0x40, chip);
  HostI2c i2c(bus);
  if (options.storage != "sd" && options.storage != "file")
    throw InputError("--storage: sd or file, not '" + options.storage + "'");
  std::optional<FileBlockDevice> file;
  SimSdCard card(std::max<uint32_t>(options.storage_kib * 2 / 1024, 1) * 1024);
  SdCard sd(card, clock);
  BlockDevice* storage = nullptr;
  if (options.storage == "file") {
    file.emplace(options.scratch / ("ergon-firmware-" + std::to_string(::getpid()) + "-" +
                                    std::to_string(next_instance()) + ".blk"),
                 512, options.storage_kib * 2);
    storage = &*file;
  } else {
    if (!sd.init()) throw DeviceError("the simulated SD card did not initialize");
    storage = &sd;
  }
  // The board's RAM less what the firmware's own buffers take (about 12 KiB): the arena.
  std::vector<uint8_t> arena(board->ram_bytes - 12 * 1024);
  const Ina219Config ina{.address = 0x40,
                         .shunt_milliohm = static_cast<uint32_t>(board->ina219.shunt_ohm * 1000 + 0.5),
                         .max_current_ma = static_cast<uint32_t>(board->ina219.current_lsb_a * 32768 * 1000 + 0.5)};
  const std::string name(board->name), rail(board->rail_name), mode(board->power_mode);
  const BoardInfo info{.kind = board->kind,
                       .name = name.c_str(),
                       .firmware_version = board->firmware_version,
                       .ram_bytes = static_cast<uint32_t>(board->ram_bytes),
                       .rail_name = rail.c_str(),
                       .power_mode = mode.c_str()};
  serve_link(options.link, stop, options.on_listening, [&](int fd) {
    FdLink byte_link(fd, options.link_bytes_per_s);
    const Hal hal{.link = byte_link, .clock = clock, .i2c = &i2c, .storage = storage};
    Firmware firmware(info, hal, options.monitor ? &ina : nullptr, arena.data(), arena.size());
    live = &firmware;
    if (!firmware.start()) std::cerr << "ergon-firmware-host: the INA219 does not answer\n";
    while (!stop && !byte_link.broken()) {
      firmware.poll();
      if (!firmware.running()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    live = nullptr;
    ::close(fd);
  });
}

}  // namespace ergon::devices::cortexm
