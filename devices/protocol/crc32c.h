#pragma once

// Freestanding CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the CRC of every frame.
// The 1 KB table is built at compile time, so on a Cortex-M it lives in flash.

#include <array>
#include <cstddef>
#include <cstdint>

namespace ergon::devices::protocol {

namespace detail {
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();
}  // namespace detail

/// Continues a CRC: crc32c_update(crc32c_update(0, a), b) == crc32c(a + b).
constexpr uint32_t crc32c_update(uint32_t crc, const uint8_t* data, std::size_t n) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i)
    crc = detail::kCrc32cTable[(crc ^ data[i]) & 0xFFU] ^ (crc >> 8);
  return ~crc;
}

constexpr uint32_t crc32c(const uint8_t* data, std::size_t n) { return crc32c_update(0, data, n); }

}  // namespace ergon::devices::protocol
