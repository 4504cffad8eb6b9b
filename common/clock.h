#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace ergon {

/// Monotonic host time in nanoseconds. Everything that reads time takes a Clock so tests can
/// drive time by hand and never sleep.
class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual int64_t now_ns() const = 0;
  /// Blocks until now_ns() >= t_ns (a test's clock just moves there). Returns at once for a
  /// time already past.
  virtual void sleep_until_ns(int64_t t_ns) const {
    const int64_t wait = t_ns - now_ns();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
  }
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
