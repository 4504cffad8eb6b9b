#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace ergon::probes {

/// A master on an I2C bus, as power-monitor drivers use it: plain writes, and a write
/// followed by a read in one transaction (repeated start), as register reads need.
/// Implementations: Linux i2c-dev (open_linux_i2c), simulated chips (SimI2cBus), and later a
/// USB-I2C bridge. A device that does not acknowledge, or a bus error, throws DeviceError
/// naming the bus, the address and the register.
class I2cBus {
 public:
  virtual ~I2cBus() = default;
  virtual void write(uint8_t address, std::span<const uint8_t> data) = 0;
  virtual void write_read(uint8_t address, std::span<const uint8_t> out,
                          std::span<uint8_t> in) = 0;
  /// "/dev/i2c-1", "sim-i2c": for messages.
  [[nodiscard]] virtual std::string name() const = 0;
};

/// The INA2xx family's registers: 16 bits, big-endian, selected by a pointer byte.
uint16_t read_register(I2cBus& bus, uint8_t address, uint8_t reg);
void write_register(I2cBus& bus, uint8_t address, uint8_t reg, uint16_t value);

/// Opens a Linux i2c-dev bus ("/dev/i2c-1"). Throws DeviceError when it cannot, saying why
/// (no such bus: is the i2c-dev module loaded; permission denied: the i2c group).
std::unique_ptr<I2cBus> open_linux_i2c(const std::string& path);

}  // namespace ergon::probes
