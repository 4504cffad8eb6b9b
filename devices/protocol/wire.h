#pragma once

// Freestanding: this header is compiled into the Cortex-M firmware. No heap, no exceptions,
// no I/O. Little-endian fixed-width fields regardless of the host's byte order.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ergon::devices::protocol {

/// Writes little-endian fields into a caller-owned buffer; `ok()` turns false (and stays
/// false) on the first write past the end, so a message writer checks once at the end.
class Writer {
 public:
  Writer(uint8_t* data, std::size_t capacity) : data_(data), capacity_(capacity) {}

  void u8(uint8_t v) { put(&v, 1); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void bytes(const void* src, std::size_t n) { put(src, n); }
  /// A fixed-size text field: copied up to its first NUL, the rest zero-filled.
  void text(const char* src, std::size_t field) {
    std::size_t n = 0;
    while (n < field && src[n] != '\0') ++n;
    put(src, n);
    for (std::size_t i = n; i < field; ++i) u8(0);
  }

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  void le(uint64_t v, std::size_t n) {
    uint8_t b[8];
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    put(b, n);
  }
  void put(const void* src, std::size_t n) {
    if (!ok_ || capacity_ - size_ < n) {
      ok_ = false;
      return;
    }
    std::memcpy(data_ + size_, src, n);
    size_ += n;
  }

  uint8_t* data_;
  std::size_t capacity_;
  std::size_t size_ = 0;
  bool ok_ = true;
};

/// Reads little-endian fields; `ok()` turns false on the first read past the end (the value
/// read is then 0), so a message parser checks once at the end.
class Reader {
 public:
  Reader(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  void bytes(void* dst, std::size_t n) {
    if (!take(n)) {
      std::memset(dst, 0, n);
      return;
    }
    std::memcpy(dst, data_ + pos_ - n, n);
  }
  /// Reads a fixed-size text field into dst[field + 1], always NUL-terminated.
  void text(char* dst, std::size_t field) {
    bytes(dst, field);
    dst[field] = '\0';
  }

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] std::size_t remaining() const { return size_ - pos_; }
  /// True when every byte was consumed and nothing was read past the end.
  [[nodiscard]] bool done() const { return ok_ && pos_ == size_; }

 private:
  bool take(std::size_t n) {
    if (!ok_ || size_ - pos_ < n) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  uint64_t le(std::size_t n) {
    if (!take(n)) return 0;
    uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= uint64_t{data_[pos_ - n + i]} << (8 * i);
    return v;
  }

  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ergon::devices::protocol
