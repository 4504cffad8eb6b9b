#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace ergon::devices::cortexm {

/// The firmware on this machine (ergon-firmware-host, and tests): a simulated INA219 on the
/// board's supply lead whose current follows what the firmware does (idle, computing,
/// paging), per the board's profile, and a file for paging storage.
struct FirmwareHostOptions {
  std::string board = "nrf52840";  ///< nrf52840 or mkr1000: RAM, tick rate, supply
  std::string link = "pty";        ///< as devices::serve_link takes it
  bool monitor = true;             ///< false: no INA219 (spans only)
  /// "sd": a simulated SD card on SPI behind the firmware's own SD driver (what the boards
  /// run); "file": a file as the block device.
  std::string storage = "sd";
  uint32_t storage_kib = 1024;
  std::filesystem::path scratch = std::filesystem::temp_directory_path();
  /// The link's rate each way: both boards talk USB CDC at full speed (12 Mbit/s, about
  /// 1 MB/s of payload), where a pty moves bytes at memory speed; so a link test measures a
  /// rate, not the host's scheduler. 0: unpaced.
  double link_bytes_per_s = 1e6;
  std::function<void(const std::string&)> on_listening;
};

/// Serves the link until `stop`. Throws InputError for a board that is not a microcontroller,
/// DeviceError when the link or storage cannot be opened.
void run_firmware_host(const FirmwareHostOptions& options, const std::atomic<bool>& stop);

}  // namespace ergon::devices::cortexm
