#pragma once

#include <chrono>
#include <cstdint>

namespace ergon {

/// Monotonic host time in nanoseconds. Everything that reads time takes a Clock so tests can
/// drive time by hand and never sleep.
class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual int64_t now_ns() const = 0;
};

class SteadyClock final : public Clock {
 public:
  [[nodiscard]] int64_t now_ns() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

/// Wall-clock time (UTC) in nanoseconds since the Unix epoch, for run records people read.
inline int64_t wall_time_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ergon
