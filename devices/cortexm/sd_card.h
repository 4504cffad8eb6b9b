#pragma once

// An SD card in SPI mode as the firmware's paging storage: 512-byte blocks, SDSC (byte
// addresses) and SDHC/SDXC (block addresses), cards of physical layer versions 1 and 2.
// Single-block reads and writes (CMD17, CMD24) with CRC7 on every command; the card's busy
// signal is waited out after each write, so a page-out is on the card when write() returns.

#include <cstdint>

#include "devices/cortexm/hal.h"

namespace ergon::devices::cortexm {

class SdCard final : public BlockDevice {
 public:
  SdCard(SpiBus& spi, TickClock& clock) : spi_(spi), clock_(clock) {}
  /// Resets the card into SPI mode and reads its capacity; false when there is no card or it
  /// does not answer as an SD card should.
  bool init();
  [[nodiscard]] uint32_t block_bytes() const override { return 512; }
  [[nodiscard]] uint32_t block_count() const override { return blocks_; }
  bool write(uint32_t first_block, const uint8_t* src, uint32_t blocks) override;
  bool read(uint32_t first_block, uint8_t* dst, uint32_t blocks) override;
  [[nodiscard]] bool high_capacity() const { return high_capacity_; }

 private:
  uint8_t command(uint8_t index, uint32_t argument);
  uint8_t app_command(uint8_t index, uint32_t argument);
  bool wait_token(uint8_t token, uint32_t timeout_ms);
  bool wait_not_busy(uint32_t timeout_ms);
  bool read_data(uint8_t* dst, uint32_t n);
  [[nodiscard]] uint32_t address(uint32_t block) const { return high_capacity_ ? block : block * 512; }
  [[nodiscard]] bool expired(uint64_t since, uint32_t ms);

  SpiBus& spi_;
  TickClock& clock_;
  uint32_t blocks_ = 0;
  bool high_capacity_ = false;
};

/// CRC7 of an SD command frame's first five bytes, shifted left with the end bit set.
uint8_t sd_crc7(const uint8_t* data, uint32_t n);

}  // namespace ergon::devices::cortexm
