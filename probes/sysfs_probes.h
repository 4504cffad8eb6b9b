#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "probes/probe.h"

namespace ergon::probes {

/// Drivers that read the kernel's files take the file system root, so tests run them against
/// fake trees (tests/data/sysfs) and `ergon probe list` against "/".

/// A Jetson's INA3221 power monitors, as the kernel exposes them:
/// - hwmon (JetPack 4.4 and later): /sys/class/hwmon/hwmonN with name "ina3221",
///   inK_label (the rail), inK_input (bus, mV), currK_input (mA), update_interval (ms);
/// - iio (TX2, JetPack 4.3 and earlier): /sys/bus/i2c/drivers/ina3221x/*/iio:device*/ with
///   rail_name_K, in_voltageK_input (mV), in_currentK_input (mA), in_powerK_input (mW).
/// One probe per chip (three channels each).
struct SysfsProbeFound {
  std::string kind;      ///< "ina3221-hwmon", "ina3221-iio", "rapl"
  std::filesystem::path dir;
  std::vector<std::string> channels;
};
std::vector<SysfsProbeFound> find_ina3221(const std::filesystem::path& root);
/// Intel/AMD RAPL energy counters: /sys/class/powercap/intel-rapl:N[:M] with name and
/// energy_uj (wrapping at max_energy_range_uj).
std::vector<SysfsProbeFound> find_rapl(const std::filesystem::path& root);

/// Samples an INA3221 directory every `interval_s` (the driver's own update interval when 0):
/// one sample per channel with bus voltage, current and power (hwmon: V x I; iio: the chip's
/// power). Throws DeviceError naming the file that cannot be read.
std::unique_ptr<Probe> open_ina3221(const SysfsProbeFound& found, double interval_s,
                                    const Clock& clock);

/// Power from RAPL energy counters: each read waits `interval_s`, reads every zone's
/// energy_uj and reports the mean power since the last read (wraparound handled). The first
/// read takes a baseline. energy_uj is root-only on current kernels: the error says so.
std::unique_ptr<Probe> open_rapl(const std::vector<SysfsProbeFound>& zones, double interval_s,
                                 const Clock& clock);

}  // namespace ergon::probes
