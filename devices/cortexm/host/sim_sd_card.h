#pragma once

// An SD card at the SPI level, for the host build and tests: it parses command frames (CRC7
// checked), answers R1/R3/R7, CSD reads, single-block reads and writes with data tokens,
// data responses and a busy period, as an SDHC card of `blocks` 512-byte blocks. It starts
// in SD mode and enters SPI mode on CMD0, as a card does. Faults on request: no card, a
// rejected write.

#include <cstdint>
#include <deque>
#include <vector>

#include "devices/cortexm/hal.h"

namespace ergon::devices::cortexm {

class SimSdCard final : public SpiBus {
 public:
  explicit SimSdCard(uint32_t blocks = 2048) : data_(std::size_t{blocks} * 512), blocks_(blocks) {}
  void select(bool selected) override;
  uint8_t transfer(uint8_t out) override;
  void set_clock_hz(uint32_t hz) override { clock_hz_ = hz; }

  void remove() { present_ = false; }
  void reject_writes(bool reject) { reject_writes_ = reject; }
  [[nodiscard]] uint32_t clock_hz() const { return clock_hz_; }
  [[nodiscard]] uint64_t blocks_written() const { return blocks_written_; }
  [[nodiscard]] uint64_t blocks_read() const { return blocks_read_; }
  [[nodiscard]] uint64_t crc_errors() const { return crc_errors_; }
  [[nodiscard]] const std::vector<uint8_t>& contents() const { return data_; }

 private:
  void on_command();
  void queue_r1(uint8_t r1);

  std::vector<uint8_t> data_;
  uint32_t blocks_;
  bool present_ = true, selected_ = false, spi_mode_ = false, idle_ = true, app_ = false;
  bool reject_writes_ = false;
  int op_cond_polls_ = 0;
  uint32_t clock_hz_ = 0;
  uint8_t frame_[6] = {};
  int frame_len_ = 0;
  std::deque<uint8_t> out_;
  // Receiving a written block: waiting for its token, then 512 bytes and 2 CRC bytes.
  bool pending_write_ = false, writing_ = false, write_started_ = false;
  uint32_t write_block_ = 0;
  std::vector<uint8_t> write_buf_;
  uint64_t blocks_written_ = 0, blocks_read_ = 0, crc_errors_ = 0;
};

}  // namespace ergon::devices::cortexm
