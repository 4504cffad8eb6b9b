#include "probes/i2c.h"

#include <fcntl.h>
#include <linux/i2c-dev.h>
#include <linux/i2c.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace ergon::probes {
namespace {

std::string hex(unsigned v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, v);
  return buf;
}

/// i2c-dev through I2C_RDWR: one ioctl per transaction, so a register read is a single
/// write-then-read with a repeated start, as the INA2xx datasheets require.
class LinuxI2cBus final : public I2cBus {
 public:
  LinuxI2cBus(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~LinuxI2cBus() override { ::close(fd_); }
  LinuxI2cBus(const LinuxI2cBus&) = delete;
  LinuxI2cBus& operator=(const LinuxI2cBus&) = delete;

  void write(uint8_t address, std::span<const uint8_t> data) override {
    i2c_msg msg{address, 0, static_cast<uint16_t>(data.size()), const_cast<uint8_t*>(data.data())};
    transfer(address, &msg, 1, data.empty() ? 0 : data[0]);
  }

  void write_read(uint8_t address, std::span<const uint8_t> out, std::span<uint8_t> in) override {
    std::array<i2c_msg, 2> msgs{{
        {address, 0, static_cast<uint16_t>(out.size()), const_cast<uint8_t*>(out.data())},
        {address, I2C_M_RD, static_cast<uint16_t>(in.size()), in.data()},
    }};
    transfer(address, msgs.data(), 2, out.empty() ? 0 : out[0]);
  }

  [[nodiscard]] std::string name() const override { return path_; }

 private:
  void transfer(uint8_t address, i2c_msg* msgs, uint32_t n, uint8_t reg) {
    i2c_rdwr_ioctl_data data{msgs, n};
    if (::ioctl(fd_, I2C_RDWR, &data) < 0) {
      const int err = errno;
      throw DeviceError("I2C transfer to " + hex(address, 2) + " (register " + hex(reg, 2) +
                        ") on " + path_ + " failed: " + std::strerror(err) +
                        (err == EREMOTEIO || err == ENXIO ? " (no device answered at that address)"
                                                          : ""));
    }
  }

  int fd_;
  std::string path_;
};

}  // namespace

uint16_t read_register(I2cBus& bus, uint8_t address, uint8_t reg) {
  const std::array<uint8_t, 1> pointer{reg};
  std::array<uint8_t, 2> value{};
  bus.write_read(address, pointer, value);
  return static_cast<uint16_t>(value[0] << 8 | value[1]);
}

void write_register(I2cBus& bus, uint8_t address, uint8_t reg, uint16_t value) {
  const std::array<uint8_t, 3> bytes{reg, static_cast<uint8_t>(value >> 8),
                                     static_cast<uint8_t>(value & 0xFF)};
  bus.write(address, bytes);
}

std::unique_ptr<I2cBus> open_linux_i2c(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string why = std::strerror(err);
    if (err == ENOENT) why += " (is the i2c-dev module loaded? modprobe i2c-dev)";
    if (err == EACCES) why += " (add yourself to the i2c group, or run as root)";
    throw DeviceError("cannot open I2C bus " + path + ": " + why);
  }
  unsigned long funcs = 0;
  if (::ioctl(fd, I2C_FUNCS, &funcs) < 0 || (funcs & I2C_FUNC_I2C) == 0) {
    ::close(fd);
    throw DeviceError(path + " is not an I2C adapter that supports combined transfers (I2C_RDWR)");
  }
  return std::make_unique<LinuxI2cBus>(fd, path);
}

}  // namespace ergon::probes
