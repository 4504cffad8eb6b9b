#include "cli/boards_cmd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "devices/host/discovery.h"

namespace ergon::cli {
namespace {

namespace fs = std::filesystem;

class FakeUsb final : public devices::UsbDeviceSource {
 public:
  std::vector<devices::UsbDevice> devices;
  bool unavailable = false;
  std::vector<devices::UsbDevice> list() override {
    if (unavailable) throw DeviceError("cannot see USB devices: /dev/bus/usb does not exist");
    return devices;
  }
};

/// A sysfs tree as Linux lays it out: USB devices under a controller, their interfaces,
/// and /sys/class/tty links into them (CDC-ACM ttys on the interface, usb-serial ttys one
/// level below).
class FakeSysfs {
 public:
  FakeSysfs() : root_(fs::temp_directory_path() / ("ergon-sysfs-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "class" / "tty" / "tty0");  // a console: no device link
    fs::create_directories(root_ / "bus" / "usb" / "devices");
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  void add_device(const std::string& path, uint16_t vid, uint16_t pid, const std::string& product,
                  const std::string& serial) {
    const fs::path dir = controller() / path;
    fs::create_directories(dir);
    write(dir / "idVendor", hex(vid));
    write(dir / "idProduct", hex(pid));
    write(dir / "product", product);
    write(dir / "serial", serial);
    fs::create_directory_symlink(dir, root_ / "bus" / "usb" / "devices" / path);
  }
  void add_tty(const std::string& device_path, const std::string& tty, bool below_interface) {
    fs::path iface = controller() / device_path / (device_path + ":1.0");
    if (below_interface) iface /= tty;
    fs::create_directories(iface);
    fs::create_directories(root_ / "class" / "tty" / tty);
    fs::create_directory_symlink(iface, root_ / "class" / "tty" / tty / "device");
  }
  [[nodiscard]] const fs::path& root() const { return root_; }

 private:
  fs::path controller() const { return root_ / "devices" / "pci0000:00" / "0000:00:14.0" / "usb1"; }
  static std::string hex(uint16_t v) {
    char b[8];
    std::snprintf(b, sizeof b, "%04x", v);
    return b;
  }
  static void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s << "\n"; }
  fs::path root_;
};

TEST(Boards, FindsKnownBoardsWithTheirTtysAndSaysWhatToRun) {
  FakeSysfs sysfs;
  sysfs.add_device("1-1", 0x2341, 0x804E, "Arduino MKR1000", "ABC123");
  sysfs.add_tty("1-1", "ttyACM0", false);
  sysfs.add_device("1-2.3", 0x0403, 0x6001, "FT232R USB UART", "FT1");
  sysfs.add_tty("1-2.3", "ttyUSB0", true);
  sysfs.add_device("1-2.4", 0x04D8, 0x00DD, "MCP2221 USB-I2C/UART Combo", "");
  sysfs.add_device("1-4", 0x0955, 0x7C18, "APX", "");
  sysfs.add_device("1-5", 0x046D, 0xC52B, "USB Receiver", "");  // a mouse receiver
  FakeUsb usb;
  usb.devices = {{0x046D, 0xC52B, "1-5"}, {0x2341, 0x804E, "1-1"}, {0x0403, 0x6001, "1-2.3"},
                 {0x04D8, 0x00DD, "1-2.4"}, {0x0955, 0x7C18, "1-4"}};
  const auto found = devices::discover_boards(usb, sysfs.root());
  ASSERT_EQ(found.size(), 4U) << "the mouse receiver is left out";
  EXPECT_EQ(found[0].usb.path, "1-1");
  EXPECT_EQ(found[0].board, "mkr1000");
  EXPECT_EQ(found[0].ttys, std::vector<std::string>{"/dev/ttyACM0"});
  EXPECT_EQ(found[0].serial, "ABC123");
  EXPECT_EQ(found[0].next_step, "ergon record --port /dev/ttyACM0 --board mkr1000");
  EXPECT_EQ(found[1].role, devices::DeviceRole::kSerialAdapter);
  EXPECT_EQ(found[1].ttys, std::vector<std::string>{"/dev/ttyUSB0"});
  EXPECT_EQ(found[2].role, devices::DeviceRole::kPowerBridge);
  EXPECT_NE(found[2].next_step.find("mcp2221"), std::string::npos);
  EXPECT_EQ(found[3].role, devices::DeviceRole::kRecovery);
  EXPECT_EQ(devices::discover_boards(usb, sysfs.root(), true).size(), 5U);

  // A Nordic PPK2 is a power meter, not an nRF52 board, and says how to read it.
  sysfs.add_device("1-6", 0x1915, 0xC00A, "PPK2", "C4D1E0F5");
  sysfs.add_tty("1-6", "ttyACM1", false);
  usb.devices.push_back({0x1915, 0xC00A, "1-6"});
  const auto with_ppk2 = devices::discover_boards(usb, sysfs.root());
  ASSERT_EQ(with_ppk2.size(), 5U);
  EXPECT_EQ(with_ppk2[4].role, devices::DeviceRole::kPowerMeter);
  EXPECT_EQ(with_ppk2[4].what, "Nordic Power Profiler Kit II");
  EXPECT_EQ(with_ppk2[4].next_step, "ergon probe read --probe ppk2:/dev/ttyACM1,mode=source,vdd=3300");
  usb.devices.pop_back();

  std::ostringstream out;
  BoardsArgs args;
  args.sysfs = sysfs.root();
  EXPECT_EQ(run_boards(args, usb, out), 0);
  EXPECT_NE(out.str().find("Arduino MKR1000"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("-> ergon record --port /dev/ttyACM0 --board mkr1000"), std::string::npos) << out.str();
  args.json = true;
  std::ostringstream json;
  run_boards(args, usb, json);
  EXPECT_NE(json.str().find("\"vendor_id\": \"2341\""), std::string::npos) << json.str();
}

TEST(Boards, ABoardWithoutItsTtyAndAMachineWithoutUsbGetClearMessages) {
  FakeSysfs sysfs;
  sysfs.add_device("2-1", 0x239A, 0x8029, "Feather nRF52840", "");
  FakeUsb usb;
  usb.devices = {{0x239A, 0x8029, "2-1"}};
  const auto found = devices::discover_boards(usb, sysfs.root());
  ASSERT_EQ(found.size(), 1U);
  EXPECT_TRUE(found[0].ttys.empty());
  EXPECT_NE(found[0].next_step.find("no tty"), std::string::npos) << found[0].next_step;
  usb.devices.clear();
  std::ostringstream out;
  BoardsArgs args;
  args.sysfs = sysfs.root();
  EXPECT_EQ(run_boards(args, usb, out), 0);
  EXPECT_NE(out.str().find("no boards"), std::string::npos);
  usb.unavailable = true;
  EXPECT_THROW(run_boards(args, usb, out), DeviceError);
  // A sysfs root that does not exist: devices are still listed, without ttys.
  usb.unavailable = false;
  usb.devices = {{0x2341, 0x804E, "1-1"}};
  EXPECT_EQ(devices::discover_boards(usb, "/nonexistent-sysfs").size(), 1U);
}

TEST(BoardsCommand, KnownListsEveryDescriptorAndWhereItComesFrom) {
  std::ostringstream out;
  EXPECT_EQ(run_known_boards(BoardsArgs{.known = true}, out), 0);
  const std::string text = out.str();
  EXPECT_NE(text.find("pi4          Cortex-A72       4   4.00 GiB  1500MHz, 1000MHz, 600MHz     built-in boards/pi4.json"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mkr1000"), std::string::npos);
  EXPECT_NE(text.find("board folders: "), std::string::npos);
}

}  // namespace
}  // namespace ergon::cli
