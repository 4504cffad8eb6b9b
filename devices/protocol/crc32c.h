#pragma once

// Freestanding CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the CRC of every frame.
// Tables are built at compile time, so on a Cortex-M they live in flash. The host uses
// slicing-by-8 (8 KB of tables, several bytes per cycle); firmware that counts its flash
// defines ERGON_CRC32C_SMALL for the byte-at-a-time loop over one 1 KB table.

#include <array>
#include <cstddef>
#include <cstdint>

namespace ergon::devices::protocol {

namespace detail {

#ifdef ERGON_CRC32C_SMALL
inline constexpr std::size_t kCrcSlices = 1;
#else
inline constexpr std::size_t kCrcSlices = 8;
#endif

constexpr std::array<std::array<uint32_t, 256>, kCrcSlices> make_crc32c_tables() {
  std::array<std::array<uint32_t, 256>, kCrcSlices> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t s = 1; s < kCrcSlices; ++s)
    for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFU];
  return t;
}
inline constexpr auto kCrc32cTables = make_crc32c_tables();

}  // namespace detail

/// Continues a CRC: crc32c_update(crc32c_update(0, a), b) == crc32c(a + b).
constexpr uint32_t crc32c_update(uint32_t crc, const uint8_t* data, std::size_t n) {
  const auto& t = detail::kCrc32cTables;
  crc = ~crc;
  std::size_t i = 0;
  if constexpr (detail::kCrcSlices == 8) {
    for (; i + 8 <= n; i += 8) {
      const uint32_t lo = crc ^ (uint32_t{data[i]} | uint32_t{data[i + 1]} << 8 |
                                 uint32_t{data[i + 2]} << 16 | uint32_t{data[i + 3]} << 24);
      crc = t[7][lo & 0xFFU] ^ t[6][(lo >> 8) & 0xFFU] ^ t[5][(lo >> 16) & 0xFFU] ^
            t[4][lo >> 24] ^ t[3][data[i + 4]] ^ t[2][data[i + 5]] ^ t[1][data[i + 6]] ^
            t[0][data[i + 7]];
    }
  }
  for (; i < n; ++i) crc = t[0][(crc ^ data[i]) & 0xFFU] ^ (crc >> 8);
  return ~crc;
}

constexpr uint32_t crc32c(const uint8_t* data, std::size_t n) { return crc32c_update(0, data, n); }

}  // namespace ergon::devices::protocol
