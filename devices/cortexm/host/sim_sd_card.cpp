#include "devices/cortexm/host/sim_sd_card.h"

#include <algorithm>

#include "devices/cortexm/sd_card.h"

namespace ergon::devices::cortexm {

void SimSdCard::select(bool selected) {
  selected_ = selected;
  if (!selected) frame_len_ = 0;
}

void SimSdCard::queue_r1(uint8_t r1) {
  out_.push_back(0xFF);  // one byte of command response time (NCR)
  out_.push_back(r1);
}

uint8_t SimSdCard::transfer(uint8_t in) {
  if (!present_ || !selected_) return 0xFF;
  if (writing_) {
    if (!write_started_) {
      write_started_ = in == 0xFE;  // the data token
      return 0xFF;
    }
    write_buf_.push_back(in);
    if (write_buf_.size() == 512 + 2) {
      writing_ = false;
      if (reject_writes_) {
        out_.push_back(0x0D);  // write error
      } else {
        std::copy_n(write_buf_.begin(), 512, data_.begin() + static_cast<std::ptrdiff_t>(write_block_) * 512);
        ++blocks_written_;
        out_.push_back(0x05);  // accepted
        for (int i = 0; i < 8; ++i) out_.push_back(0x00);  // busy while programming
      }
    }
    return 0xFF;
  }
  if (!out_.empty()) {
    const uint8_t b = out_.front();
    out_.pop_front();
    if (out_.empty() && pending_write_) {  // CMD24's R1 is out: the block comes next
      pending_write_ = false;
      writing_ = true;
      write_started_ = false;
    }
    return b;
  }
  if (frame_len_ == 0 && (in & 0xC0) != 0x40) return 0xFF;  // not a command's first byte
  frame_[frame_len_++] = in;
  if (frame_len_ == 6) {
    frame_len_ = 0;
    on_command();
  }
  return 0xFF;
}

void SimSdCard::on_command() {
  const uint8_t index = frame_[0] & 0x3F;
  const uint32_t arg = uint32_t{frame_[1]} << 24 | uint32_t{frame_[2]} << 16 | uint32_t{frame_[3]} << 8 | frame_[4];
  if (sd_crc7(frame_, 5) != frame_[5]) {
    ++crc_errors_;
    return queue_r1(0x08 | (idle_ ? 1 : 0));  // COM CRC error
  }
  if (!spi_mode_ && index != 0) return;  // in SD mode until CMD0 with CS asserted
  const bool app = app_;
  app_ = false;
  const uint8_t idle_bit = idle_ ? 1 : 0;
  if (app && index == 41) {
    if (++op_cond_polls_ >= 3) idle_ = false;  // initialization takes a few polls
    return queue_r1(idle_ ? 1 : 0);
  }
  switch (index) {
    case 0:
      spi_mode_ = true;
      idle_ = true;
      op_cond_polls_ = 0;
      return queue_r1(0x01);
    case 8:
      queue_r1(idle_bit);
      out_.insert(out_.end(), {0x00, 0x00, static_cast<uint8_t>(arg >> 8 & 0x0F), static_cast<uint8_t>(arg)});
      return;
    case 55:
      app_ = true;
      return queue_r1(idle_bit);
    case 58:
      queue_r1(idle_bit);
      out_.insert(out_.end(), {static_cast<uint8_t>(idle_ ? 0x40 : 0xC0), 0xFF, 0x80, 0x00});  // CCS, powered up
      return;
    case 16:
      return queue_r1(idle_bit);
    case 9: {
      queue_r1(idle_bit);
      const uint32_t c_size = blocks_ / 1024 - 1;  // CSD version 2.0
      uint8_t csd[16] = {0x40, 0x0E, 0x00, 0x32, 0x5B, 0x59, 0x00, static_cast<uint8_t>(c_size >> 16 & 0x3F),
                         static_cast<uint8_t>(c_size >> 8), static_cast<uint8_t>(c_size), 0x7F, 0x80,
                         0x0A, 0x40, 0x00, 0x01};
      out_.push_back(0xFF);
      out_.push_back(0xFE);
      out_.insert(out_.end(), csd, csd + 16);
      out_.insert(out_.end(), {0xFF, 0xFF});
      return;
    }
    case 17:
      if (idle_ || arg >= blocks_) return queue_r1(idle_bit | 0x40);  // parameter error
      queue_r1(0);
      out_.insert(out_.end(), {0xFF, 0xFF, 0xFE});
      out_.insert(out_.end(), data_.begin() + static_cast<std::ptrdiff_t>(arg) * 512,
                  data_.begin() + static_cast<std::ptrdiff_t>(arg + 1) * 512);
      out_.insert(out_.end(), {0xFF, 0xFF});
      ++blocks_read_;
      return;
    case 24:
      if (idle_ || arg >= blocks_) return queue_r1(idle_bit | 0x40);
      queue_r1(0);
      // The R1 goes out first; the block follows once the host has read it.
      write_block_ = arg;
      write_buf_.clear();
      pending_write_ = true;
      return;
    default:
      return queue_r1(idle_bit | 0x04);  // illegal command
  }
}

}  // namespace ergon::devices::cortexm
