#pragma once

#include "common/clock.h"

namespace ergon::testing {

/// Time that moves only when the test says so.
class FakeClock final : public Clock {
 public:
  [[nodiscard]] int64_t now_ns() const override { return now_; }
  void advance_ns(int64_t ns) { now_ += ns; }
  void set_ns(int64_t ns) { now_ = ns; }

 private:
  int64_t now_ = 1'000'000'000;
};

}  // namespace ergon::testing
