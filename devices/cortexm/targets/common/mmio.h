#pragma once

// Memory-mapped registers, by address: the targets' HALs use the datasheets' offsets
// directly (no vendor headers: Debian ships none).

#include <cstdint>

namespace ergon::devices::cortexm::mmio {

inline volatile uint32_t& r32(uintptr_t address) { return *reinterpret_cast<volatile uint32_t*>(address); }
inline volatile uint16_t& r16(uintptr_t address) { return *reinterpret_cast<volatile uint16_t*>(address); }
inline volatile uint8_t& r8(uintptr_t address) { return *reinterpret_cast<volatile uint8_t*>(address); }

/// NVIC interrupt enable for external interrupt `irq`.
inline void enable_irq(uint32_t irq) { r32(0xE000E100 + 4 * (irq / 32)) = 1U << (irq % 32); }

/// A single-producer (interrupt) single-consumer (main loop) byte queue.
template <uint32_t N>
class RingBuffer {
  static_assert((N & (N - 1)) == 0, "a power of two");

 public:
  bool push(uint8_t b) {
    const uint32_t h = head_;
    if (h - tail_ == N) return false;  // full: the byte is lost (the decoder counts the gap)
    data_[h % N] = b;
    head_ = h + 1;
    return true;
  }
  bool pop(uint8_t& b) {
    const uint32_t t = tail_;
    if (t == head_) return false;
    b = data_[t % N];
    tail_ = t + 1;
    return true;
  }

 private:
  uint8_t data_[N] = {};
  volatile uint32_t head_ = 0, tail_ = 0;
};

}  // namespace ergon::devices::cortexm::mmio
