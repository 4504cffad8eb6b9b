#include "devices/host/discovery.h"

#include <libusb-1.0/libusb.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <system_error>

#include "common/error.h"
#include "probes/ppk2.h"

namespace ergon::devices {
namespace {

namespace fs = std::filesystem;

struct Known {
  uint16_t vendor;
  int product;  // -1: any product of the vendor
  DeviceRole role;
  const char* what;
  const char* board;
};

// Vendor and product ids from the vendors' USB descriptors (and their Linux drivers' tables).
const Known kKnown[] = {
    {0x2341, 0x804E, DeviceRole::kBoard, "Arduino MKR1000", "mkr1000"},
    {0x2341, 0x004E, DeviceRole::kBootloader, "Arduino MKR1000 in its SAM-BA bootloader", "mkr1000"},
    {0x2341, -1, DeviceRole::kBoard, "Arduino board", ""},
    {0x2A03, -1, DeviceRole::kBoard, "Arduino board", ""},
    {0x239A, 0x8029, DeviceRole::kBoard, "Adafruit Feather nRF52840", "nrf52840"},
    {0x239A, 0x0029, DeviceRole::kBootloader, "Adafruit Feather nRF52840 in its UF2 bootloader", "nrf52840"},
    {probes::kPpk2UsbVendor, probes::kPpk2UsbProduct, DeviceRole::kPowerMeter, "Nordic Power Profiler Kit II", ""},
    {0x1915, 0x521F, DeviceRole::kBootloader, "Nordic nRF52840 Dongle in its DFU bootloader", "nrf52840"},
    {0x1915, -1, DeviceRole::kBoard, "Nordic nRF52 board", "nrf52840"},
    {0x1366, -1, DeviceRole::kBoard, "SEGGER J-Link (nRF52840 DK: its virtual COM port)", "nrf52840"},
    {0x0955, 0x7C18, DeviceRole::kRecovery, "NVIDIA Jetson TX2 in recovery mode", "tx2"},
    {0x0955, 0x7020, DeviceRole::kBoard, "NVIDIA Jetson (L4T USB device mode)", "tx2"},
    {0x0955, -1, DeviceRole::kRecovery, "NVIDIA Jetson in recovery mode", ""},
    {0x0525, 0xA4A7, DeviceRole::kBoard, "Linux USB gadget serial (a Raspberry Pi 4 in gadget mode?)", "pi4"},
    {0x1D6B, 0x0104, DeviceRole::kBoard, "Linux USB composite gadget (a Raspberry Pi 4 in gadget mode?)", "pi4"},
    {0x04D8, 0x00DD, DeviceRole::kPowerBridge, "Microchip MCP2221A USB-I2C bridge", ""},
    {0x0403, -1, DeviceRole::kSerialAdapter, "FTDI USB-serial adapter", ""},
    {0x10C4, 0xEA60, DeviceRole::kSerialAdapter, "Silicon Labs CP210x USB-serial adapter", ""},
    {0x1A86, 0x7523, DeviceRole::kSerialAdapter, "WCH CH340 USB-serial adapter", ""},
    {0x067B, 0x2303, DeviceRole::kSerialAdapter, "Prolific PL2303 USB-serial adapter", ""},
};

const Known* recognize(uint16_t vendor, uint16_t product) {
  for (const Known& k : kKnown)
    if (k.vendor == vendor && (k.product < 0 || k.product == product)) return &k;
  return nullptr;
}

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

/// tty name -> the USB device path ("1-1.4") it belongs to, from <root>/class/tty/*/device.
std::map<std::string, std::vector<std::string>> ttys_by_usb_path(const fs::path& root) {
  std::map<std::string, std::vector<std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / "class" / "tty", ec)) {
    std::error_code ec2;
    fs::path dev = fs::canonical(entry.path() / "device", ec2);
    if (ec2) continue;  // virtual terminals have no device
    // Up from the interface ("1-1.4:1.0", or a usb-serial port below it) to the device.
    for (; !dev.empty() && dev.has_filename(); dev = dev.parent_path()) {
      const std::string name = dev.filename().string();
      if (name.find('-') != std::string::npos && name.find(':') == std::string::npos &&
          fs::exists(dev / "idVendor")) {
        out[name].push_back("/dev/" + entry.path().filename().string());
        break;
      }
      if (dev == dev.root_path()) break;
    }
  }
  for (auto& [path, ttys] : out) std::sort(ttys.begin(), ttys.end());
  return out;
}

std::string next_step(const DiscoveredDevice& d) {
  const std::string port = d.ttys.empty() ? "PORT" : d.ttys.front();
  const std::string board = d.board.empty() ? "" : " --board " + d.board;
  switch (d.role) {
    case DeviceRole::kBoard:
      if (d.ttys.empty()) return "no tty: is its firmware or agent running (see docs/boards.md)?";
      return "ergon record --port " + port + board;
    case DeviceRole::kBootloader:
      return "in its bootloader: flash the Ergon firmware (scripts/flash_firmware.sh " + d.board + ")";
    case DeviceRole::kRecovery:
      return "in recovery mode: boot it normally and run ergon-agent on it";
    case DeviceRole::kPowerBridge:
      return "a power monitor behind it: ergon probe read --probe ina219:mcp2221@0x40,shunt=0.1";
    case DeviceRole::kPowerMeter:
      if (d.ttys.empty()) return "no tty: is the cdc_acm driver loaded?";
      return "ergon probe read --probe ppk2:" + port + ",mode=source,vdd=3300";
    case DeviceRole::kSerialAdapter:
      if (d.ttys.empty()) return "no tty: is the usbserial driver loaded?";
      return "a board on its UART: ergon record --port " + port + " --board BOARD";
    case DeviceRole::kUnknown:
      return "";
  }
  return "";
}

class LibusbSource final : public UsbDeviceSource {
 public:
  std::vector<UsbDevice> list() override {
    libusb_context* ctx = nullptr;
    if (const int rc = libusb_init(&ctx); rc != 0)
      throw DeviceError(std::string("cannot list USB devices: ") + libusb_strerror(static_cast<libusb_error>(rc)) +
                        " (no USB here, or no /dev/bus/usb in this container)");
    libusb_device** devices = nullptr;
    const ssize_t n = libusb_get_device_list(ctx, &devices);
    if (n < 0) {
      libusb_exit(ctx);
      throw DeviceError(std::string("cannot list USB devices: ") + libusb_strerror(static_cast<libusb_error>(n)));
    }
    std::vector<UsbDevice> out;
    for (ssize_t i = 0; i < n; ++i) {
      libusb_device_descriptor desc{};
      if (libusb_get_device_descriptor(devices[i], &desc) != 0) continue;
      uint8_t ports[8];
      const int depth = libusb_get_port_numbers(devices[i], ports, sizeof ports);
      UsbDevice d{desc.idVendor, desc.idProduct, std::to_string(libusb_get_bus_number(devices[i]))};
      if (depth <= 0) continue;  // a root hub
      for (int p = 0; p < depth; ++p) d.path += (p == 0 ? "-" : ".") + std::to_string(ports[p]);
      out.push_back(d);
    }
    libusb_free_device_list(devices, 1);
    libusb_exit(ctx);
    std::error_code ec;
    if (out.empty() && !fs::exists("/dev/bus/usb", ec))
      throw DeviceError("cannot see USB devices: /dev/bus/usb does not exist (a container without "
                        "USB passed through?)");
    return out;
  }
};

}  // namespace

std::unique_ptr<UsbDeviceSource> libusb_device_source() { return std::make_unique<LibusbSource>(); }

std::vector<DiscoveredDevice> discover_boards(UsbDeviceSource& source, const fs::path& sysfs_root, bool all) {
  const auto ttys = ttys_by_usb_path(sysfs_root);
  std::vector<DiscoveredDevice> out;
  for (const UsbDevice& usb : source.list()) {
    const Known* k = recognize(usb.vendor_id, usb.product_id);
    if (k == nullptr && !all) continue;
    DiscoveredDevice d;
    d.usb = usb;
    if (k != nullptr) {
      d.role = k->role;
      d.what = k->what;
      d.board = k->board;
    } else {
      d.what = "unknown device";
    }
    const fs::path dir = sysfs_root / "bus" / "usb" / "devices" / usb.path;
    d.manufacturer = read_line(dir / "manufacturer");
    d.product = read_line(dir / "product");
    d.serial = read_line(dir / "serial");
    if (const auto it = ttys.find(usb.path); it != ttys.end()) d.ttys = it->second;
    d.next_step = next_step(d);
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const DiscoveredDevice& a, const DiscoveredDevice& b) {
    return a.usb.path < b.usb.path;
  });
  return out;
}

std::string to_string(DeviceRole role) {
  switch (role) {
    case DeviceRole::kBoard: return "board";
    case DeviceRole::kBootloader: return "bootloader";
    case DeviceRole::kRecovery: return "recovery";
    case DeviceRole::kPowerMeter: return "power-meter";
    case DeviceRole::kPowerBridge: return "power-bridge";
    case DeviceRole::kSerialAdapter: return "serial-adapter";
    case DeviceRole::kUnknown: return "unknown";
  }
  return "unknown";
}

}  // namespace ergon::devices
