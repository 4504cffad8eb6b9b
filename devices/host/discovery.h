#pragma once

// USB board discovery (`ergon boards`): the USB devices present, recognized by vendor and
// product id (boards running Ergon, boards in their bootloaders, Jetsons in recovery mode,
// USB-I2C bridges for power monitors, USB-serial chips), each with its tty from sysfs and
// what to pass to `ergon record`.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ergon::devices {

/// One USB device as the bus lists it: `path` is the kernel's name for its port
/// ("1-1.4": bus 1, port 4 of the hub on port 1), as in /sys/bus/usb/devices.
struct UsbDevice {
  uint16_t vendor_id = 0;
  uint16_t product_id = 0;
  std::string path;
};

/// Where the device list comes from: libusb on a real machine, a list in tests.
class UsbDeviceSource {
 public:
  virtual ~UsbDeviceSource() = default;
  /// Throws DeviceError saying why USB cannot be listed (no /dev/bus/usb in a container...).
  virtual std::vector<UsbDevice> list() = 0;
};
std::unique_ptr<UsbDeviceSource> libusb_device_source();

enum class DeviceRole { kBoard, kBootloader, kRecovery, kPowerBridge, kPowerMeter, kSerialAdapter, kUnknown };

struct DiscoveredDevice {
  UsbDevice usb;
  DeviceRole role = DeviceRole::kUnknown;
  std::string what;         ///< "Arduino MKR1000", "MCP2221A USB-I2C bridge", ...
  std::string board;        ///< the --board name when it is one Ergon knows; else empty
  std::vector<std::string> ttys;  ///< "/dev/ttyACM0"...
  std::string manufacturer, product, serial;  ///< from sysfs, when readable
  std::string next_step;    ///< what to run with it
};

/// Recognizes every listed device that Ergon has a use for (unknown devices are left out
/// unless `all`), with ttys and strings read under `sysfs_root` ("/sys" on a real machine).
std::vector<DiscoveredDevice> discover_boards(UsbDeviceSource& source,
                                              const std::filesystem::path& sysfs_root,
                                              bool all = false);

std::string to_string(DeviceRole role);

}  // namespace ergon::devices
