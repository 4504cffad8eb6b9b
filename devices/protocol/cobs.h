#pragma once

// Freestanding Consistent Overhead Byte Stuffing: removes every 0x00 from a frame so 0x00 can
// delimit frames on a byte stream. Overhead: one byte per 254 bytes, plus one.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ergon::devices::protocol {

constexpr std::size_t cobs_max_encoded_size(std::size_t n) { return n + n / 254 + 1; }

/// Encodes src[0..n) into dst (capacity cap). Returns the encoded size, or 0 if cap is too
/// small. The output holds no 0x00 and no delimiter.
inline std::size_t cobs_encode(const uint8_t* src, std::size_t n, uint8_t* dst, std::size_t cap) {
  if (cap < cobs_max_encoded_size(n)) return 0;
  std::size_t code_pos = 0;
  std::size_t out = 1;
  uint8_t code = 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (src[i] == 0) {
      dst[code_pos] = code;
      code_pos = out++;
      code = 1;
      continue;
    }
    dst[out++] = src[i];
    if (++code == 0xFF) {
      dst[code_pos] = code;
      code_pos = out++;
      code = 1;
    }
  }
  dst[code_pos] = code;
  return out;
}

/// Decodes in place (the result is never longer than the input). Returns the decoded size,
/// or -1 if the input is not valid COBS (a zero code, or a code running past the end). Zero
/// bytes inside a run are not looked for: the stream decoder splits on them first, and the
/// frame CRC catches anything else.
inline std::ptrdiff_t cobs_decode_in_place(uint8_t* buf, std::size_t n) {
  std::size_t in = 0;
  std::size_t out = 0;
  while (in < n) {
    const uint8_t code = buf[in++];
    if (code == 0) return -1;
    const std::size_t run = code - 1U;
    if (run > n - in) return -1;
    if (run > 32) {
      std::memmove(buf + out, buf + in, run);
    } else {
      // Board payloads are zero-heavy, so most runs are a few bytes: a forward byte copy
      // (safe, as out <= in) beats a call.
      for (std::size_t k = 0; k < run; ++k) buf[out + k] = buf[in + k];
    }
    out += run;
    in += run;
    if (code != 0xFF && in < n) buf[out++] = 0;
  }
  return static_cast<std::ptrdiff_t>(out);
}

}  // namespace ergon::devices::protocol
