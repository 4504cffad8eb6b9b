#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "probes/i2c.h"

namespace ergon::probes {

/// 64-byte HID reports to and from a USB device: what the MCP2221A speaks.
class HidTransport {
 public:
  using Report = std::array<uint8_t, 64>;
  virtual ~HidTransport() = default;
  virtual void send(const Report& report) = 0;
  /// The device's answer to the last report; DeviceError on timeout or a USB error.
  virtual Report receive() = 0;
  [[nodiscard]] virtual std::string name() const = 0;
};

/// Microchip's MCP2221A USB-I2C bridge (USB 04d8:00dd), so an INA219 can hang off a desktop
/// without a board. I2C per the datasheet's HID commands: 0x90 write, 0x94 write without
/// stop + 0x93 read with repeated start (a register read), 0x91 read, 0x40 fetch the data,
/// 0x10 status (speed, cancel, the engine's state: 0x25 means the address was not
/// acknowledged).
class Mcp2221Bus final : public I2cBus {
 public:
  explicit Mcp2221Bus(std::unique_ptr<HidTransport> transport, double bus_hz = 400e3);

  void write(uint8_t address, std::span<const uint8_t> data) override;
  void write_read(uint8_t address, std::span<const uint8_t> out, std::span<uint8_t> in) override;
  [[nodiscard]] std::string name() const override { return transport_->name(); }

 private:
  HidTransport::Report command(const HidTransport::Report& report, const char* what,
                               uint8_t address);
  void transfer(uint8_t cmd, uint8_t address, std::span<const uint8_t> data);
  void read_into(uint8_t cmd, uint8_t address, std::span<uint8_t> in);
  /// After a transfer: waits for the engine to finish; DeviceError on a NACK (and cancels).
  void wait_idle(uint8_t address, const char* what);
  /// Cancels the failed transfer and throws DeviceError: nobody acknowledged `address`.
  [[noreturn]] void not_acknowledged(uint8_t address);

  std::unique_ptr<HidTransport> transport_;
};

/// MCP2221A bridges on USB (libusb): their bus numbers and addresses, for `probe list`.
/// Empty when there are none or USB cannot be enumerated.
std::vector<std::string> find_mcp2221();
/// Opens the `index`-th MCP2221A (libusb: detaches the kernel's HID driver, claims the HID
/// interface). DeviceError saying why when it cannot (none plugged in, no permission: a
/// udev rule for 04d8:00dd).
std::unique_ptr<HidTransport> open_mcp2221_usb(int index = 0);

}  // namespace ergon::probes
