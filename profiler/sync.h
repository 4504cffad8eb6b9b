#pragma once

#include <cstdint>

namespace ergon::profiler {

/// One NTP-style exchange between host and device clocks: the host sent at host_tx_ns, the
/// device stamped receipt and reply in its ticks, the host received at host_rx_ns. The
/// minimum-RTT exchanges fit the device-to-host clock mapping (energy attribution issue).
struct SyncPoint {
  uint32_t sync_id = 0;
  int64_t host_tx_ns = 0;
  uint64_t device_rx_ticks = 0;
  uint64_t device_tx_ticks = 0;
  int64_t host_rx_ns = 0;

  [[nodiscard]] int64_t round_trip_ns() const { return host_rx_ns - host_tx_ns; }
};

}  // namespace ergon::profiler
