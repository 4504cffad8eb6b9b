#pragma once

#include "common/clock.h"

namespace ergon::testing {

/// Time that moves only when the test says so, or when code sleeps on it (the sleep moves
/// time to its end at once, and is counted).
class FakeClock final : public Clock {
 public:
  [[nodiscard]] int64_t now_ns() const override { return now_; }
  void sleep_until_ns(int64_t t_ns) const override {
    ++sleeps_;
    if (t_ns > now_) now_ = t_ns;
  }
  void advance_ns(int64_t ns) { now_ += ns; }
  void set_ns(int64_t ns) { now_ = ns; }
  [[nodiscard]] int64_t sleeps() const { return sleeps_; }

 private:
  mutable int64_t now_ = 1'000'000'000;
  mutable int64_t sleeps_ = 0;
};

}  // namespace ergon::testing
