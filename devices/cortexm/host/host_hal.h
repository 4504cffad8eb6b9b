#pragma once

// The firmware's HAL on a Linux host, so CI runs the firmware's own code: the link is a file
// descriptor (a pseudo-terminal or a TCP socket), the clock the steady clock at the tick rate
// of the board's timer, the I2C master any probes::I2cBus (a simulated INA219, or a real
// i2c-dev bus), the block device a file.

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/clock.h"
#include "devices/cortexm/hal.h"
#include "probes/i2c.h"

namespace ergon::devices::cortexm {

/// A file descriptor as the board's link. With `bytes_per_s`, each direction moves no faster
/// than a line of that rate (a microcontroller's UART or USB CDC), where a pty or socket moves
/// bytes at memory speed; 0: unpaced.
class FdLink final : public ByteLink {
 public:
  explicit FdLink(int fd, double bytes_per_s = 0) : fd_(fd), bytes_per_s_(bytes_per_s) {}
  std::size_t read(uint8_t* dst, std::size_t capacity) override;
  bool write(const uint8_t* src, std::size_t n) override;
  [[nodiscard]] bool broken() const { return broken_; }

 private:
  /// Holds `n` bytes on the line whose next free instant is `free_ns`: waits once the line
  /// is more than a sleep's granularity behind, so many small frames pace on average.
  void occupy(int64_t& free_ns, std::size_t n) const;

  int fd_;
  double bytes_per_s_;
  bool broken_ = false;
  SteadyClock clock_;
  int64_t tx_free_ns_ = 0, rx_free_ns_ = 0;
};

class HostClock final : public TickClock {
 public:
  explicit HostClock(uint64_t tick_hz) : tick_hz_(tick_hz) {}
  uint64_t now_ticks() override;
  [[nodiscard]] uint64_t tick_hz() const override { return tick_hz_; }

 private:
  SteadyClock clock_;
  uint64_t tick_hz_;
};

class HostI2c final : public I2cMaster {
 public:
  explicit HostI2c(probes::I2cBus& bus) : bus_(bus) {}
  bool transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx,
                std::size_t rx_n) override;

 private:
  probes::I2cBus& bus_;
};

/// A file of `block_count` blocks of `block_bytes`, written through (fdatasync) like a card.
class FileBlockDevice final : public BlockDevice {
 public:
  FileBlockDevice(const std::filesystem::path& path, uint32_t block_bytes, uint32_t block_count);
  ~FileBlockDevice();
  FileBlockDevice(const FileBlockDevice&) = delete;
  FileBlockDevice& operator=(const FileBlockDevice&) = delete;
  [[nodiscard]] uint32_t block_bytes() const override { return block_bytes_; }
  [[nodiscard]] uint32_t block_count() const override { return block_count_; }
  bool write(uint32_t first_block, const uint8_t* src, uint32_t blocks) override;
  bool read(uint32_t first_block, uint8_t* dst, uint32_t blocks) override;

 private:
  int fd_ = -1;
  std::filesystem::path path_;
  uint32_t block_bytes_, block_count_;
};

}  // namespace ergon::devices::cortexm
