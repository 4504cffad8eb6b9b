#include "devices/cortexm/sd_card.h"

namespace ergon::devices::cortexm {
namespace {

constexpr uint8_t kGoIdle = 0, kSendIfCond = 8, kSendCsd = 9, kSetBlockLen = 16, kReadBlock = 17,
                  kWriteBlock = 24, kAppCmd = 55, kReadOcr = 58, kAppSendOpCond = 41;
constexpr uint8_t kIdle = 0x01, kIllegal = 0x04;
constexpr uint8_t kDataToken = 0xFE;

}  // namespace

uint8_t sd_crc7(const uint8_t* data, uint32_t n) {
  uint8_t crc = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t b = data[i];
    for (int bit = 0; bit < 8; ++bit, b = static_cast<uint8_t>(b << 1)) {
      // The 7-bit CRC kept in bits 7..1: x^7 + x^3 + 1 is 0x09, 0x12 shifted.
      const bool top = ((b ^ crc) & 0x80) != 0;
      crc = static_cast<uint8_t>(crc << 1);
      if (top) crc ^= 0x12;
    }
  }
  return static_cast<uint8_t>(crc | 1);
}

bool SdCard::expired(uint64_t since, uint32_t ms) {
  return clock_.now_ticks() - since > clock_.tick_hz() / 1000 * ms;
}

uint8_t SdCard::command(uint8_t index, uint32_t argument) {
  spi_.select(false);
  spi_.transfer(0xFF);
  spi_.select(true);
  spi_.transfer(0xFF);
  const uint8_t frame[5] = {static_cast<uint8_t>(0x40 | index), static_cast<uint8_t>(argument >> 24),
                            static_cast<uint8_t>(argument >> 16), static_cast<uint8_t>(argument >> 8),
                            static_cast<uint8_t>(argument)};
  for (uint8_t b : frame) spi_.transfer(b);
  spi_.transfer(sd_crc7(frame, 5));
  // R1 comes within 8 bytes: the first with its top bit clear.
  for (int i = 0; i < 9; ++i) {
    const uint8_t r1 = spi_.transfer(0xFF);
    if ((r1 & 0x80) == 0) return r1;
  }
  return 0xFF;
}

uint8_t SdCard::app_command(uint8_t index, uint32_t argument) {
  const uint8_t r1 = command(kAppCmd, 0);
  if ((r1 & ~kIdle) != 0) return r1;
  return command(index, argument);
}

bool SdCard::wait_token(uint8_t token, uint32_t timeout_ms) {
  const uint64_t since = clock_.now_ticks();
  for (;;) {
    const uint8_t b = spi_.transfer(0xFF);
    if (b == token) return true;
    if (b != 0xFF || expired(since, timeout_ms)) return false;  // an error token, or nothing
  }
}

bool SdCard::wait_not_busy(uint32_t timeout_ms) {
  const uint64_t since = clock_.now_ticks();
  while (spi_.transfer(0xFF) != 0xFF)
    if (expired(since, timeout_ms)) return false;
  return true;
}

bool SdCard::read_data(uint8_t* dst, uint32_t n) {
  if (!wait_token(kDataToken, 200)) return false;
  for (uint32_t i = 0; i < n; ++i) dst[i] = spi_.transfer(0xFF);
  spi_.transfer(0xFF);  // CRC16, not checked
  spi_.transfer(0xFF);
  return true;
}

bool SdCard::init() {
  blocks_ = 0;
  spi_.set_clock_hz(400'000);
  spi_.select(false);
  for (int i = 0; i < 10; ++i) spi_.transfer(0xFF);  // at least 74 clocks with CS high
  bool ok = command(kGoIdle, 0) == kIdle;
  bool v2 = false;
  if (ok) {
    const uint8_t r1 = command(kSendIfCond, 0x1AA);
    if ((r1 & kIllegal) == 0) {
      uint8_t r7[4];
      for (uint8_t& b : r7) b = spi_.transfer(0xFF);
      v2 = true;
      ok = r1 == kIdle && (r7[2] & 0x0F) == 0x01 && r7[3] == 0xAA;  // 2.7-3.6 V, our pattern
    }
  }
  if (ok) {  // leave the idle state: up to a second
    const uint64_t since = clock_.now_ticks();
    uint8_t r1 = kIdle;
    while ((r1 = app_command(kAppSendOpCond, v2 ? 0x40000000U : 0)) == kIdle && !expired(since, 1000)) {
    }
    ok = r1 == 0;
  }
  if (ok && v2) {
    ok = command(kReadOcr, 0) == 0;
    uint8_t ocr[4];
    for (uint8_t& b : ocr) b = spi_.transfer(0xFF);
    high_capacity_ = ok && (ocr[0] & 0x40) != 0;
  }
  if (ok && !high_capacity_) ok = command(kSetBlockLen, 512) == 0;
  uint8_t csd[16] = {};
  ok = ok && command(kSendCsd, 0) == 0 && read_data(csd, 16);
  if (ok) {
    if ((csd[0] >> 6) == 1) {  // CSD version 2: C_SIZE in bits 69..48, 512 KiB units
      const uint32_t c_size = (uint32_t{csd[7]} & 0x3F) << 16 | uint32_t{csd[8]} << 8 | csd[9];
      blocks_ = (c_size + 1) * 1024;
    } else {  // version 1: (C_SIZE + 1) x 2^(C_SIZE_MULT + 2) x 2^READ_BL_LEN bytes
      const uint32_t read_bl_len = csd[5] & 0x0F;
      const uint32_t c_size = (uint32_t{csd[6]} & 0x03) << 10 | uint32_t{csd[7]} << 2 | csd[8] >> 6;
      const uint32_t mult = (uint32_t{csd[9]} & 0x03) << 1 | csd[10] >> 7;
      blocks_ = ((c_size + 1) << (mult + 2)) << read_bl_len >> 9;
    }
    spi_.set_clock_hz(8'000'000);
  }
  spi_.select(false);
  spi_.transfer(0xFF);
  return ok && blocks_ > 0;
}

bool SdCard::read(uint32_t first_block, uint8_t* dst, uint32_t blocks) {
  bool ok = first_block + blocks <= blocks_;
  for (uint32_t i = 0; ok && i < blocks; ++i)
    ok = command(kReadBlock, address(first_block + i)) == 0 && read_data(dst + i * 512, 512);
  spi_.select(false);
  spi_.transfer(0xFF);
  return ok;
}

bool SdCard::write(uint32_t first_block, const uint8_t* src, uint32_t blocks) {
  bool ok = first_block + blocks <= blocks_;
  for (uint32_t i = 0; ok && i < blocks; ++i) {
    ok = command(kWriteBlock, address(first_block + i)) == 0;
    if (!ok) break;
    spi_.transfer(0xFF);
    spi_.transfer(kDataToken);
    for (uint32_t j = 0; j < 512; ++j) spi_.transfer(src[i * 512 + j]);
    spi_.transfer(0xFF);  // CRC16, ignored in SPI mode
    spi_.transfer(0xFF);
    const uint8_t response = spi_.transfer(0xFF) & 0x1F;
    ok = response == 0x05 && wait_not_busy(500);  // accepted, then programmed
  }
  spi_.select(false);
  spi_.transfer(0xFF);
  return ok;
}

}  // namespace ergon::devices::cortexm
