#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/clock.h"
#include "probes/probe.h"

namespace ergon::probes {

/// NVIDIA's management library, loaded at run time (dlopen): no build dependency, and a clear
/// message on machines without an NVIDIA driver. Power in watts (NVML reports milliwatts),
/// energy in joules (millijoules since the driver loaded), power limits in watts.
class Nvml {
 public:
  /// Loads the library (default: the driver's libnvidia-ml.so.1) and initializes it. Throws
  /// DeviceError saying why NVML is not available.
  static std::shared_ptr<Nvml> open(const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  [[nodiscard]] unsigned device_count() const;
  [[nodiscard]] std::string name(unsigned gpu) const;
  [[nodiscard]] double power_w(unsigned gpu) const;
  /// Energy since the driver loaded (Volta and later); DeviceError where unsupported.
  [[nodiscard]] double energy_j(unsigned gpu) const;
  [[nodiscard]] double power_limit_w(unsigned gpu) const;
  /// The range the board accepts for its power limit.
  [[nodiscard]] std::pair<double, double> power_limit_range_w(unsigned gpu) const;
  /// Sets the power limit (needs root, as nvidia-smi -pl does). Throws InputError for a limit
  /// outside the board's range, DeviceError with NVML's reason otherwise.
  void set_power_limit_w(unsigned gpu, double watts);

  struct Api;

 private:
  Nvml() = default;
  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
};

/// Samples each GPU's power (channel = GPU index) every `interval_s` (default 50 ms: NVML
/// updates power about every 20-100 ms depending on the board).
std::unique_ptr<Probe> open_nvml_probe(std::shared_ptr<Nvml> nvml, double interval_s,
                                       const Clock& clock);

}  // namespace ergon::probes
