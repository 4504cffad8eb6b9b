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
///
/// Three power readings, which differ on real GPUs (NVML's reference for
/// nvmlDeviceGetPowerUsage): `power_w` is nvmlDeviceGetPowerUsage, which on Ampere (except
/// GA100) and newer, the H100 included, is the power averaged over the last second, not an
/// instant; `instant_power_w` is the field NVML_FI_DEV_POWER_INSTANT (drivers R515 and later);
/// `energy_j` is the energy counter (Volta and later).
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
  /// The power now (NVML_FI_DEV_POWER_INSTANT); DeviceError where the driver lacks the field.
  [[nodiscard]] double instant_power_w(unsigned gpu) const;
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

/// What an NVML probe's samples are.
enum class NvmlSource {
  kAuto,     ///< the energy counter where every GPU has one, else the instant field, else average
  kEnergy,   ///< the energy counter between two of its steps: their mean power, stamped half way
             ///< (attribution reads samples as points); the steps tile the time, so the
             ///< samples' energy is the counter's
  kInstant,  ///< NVML_FI_DEV_POWER_INSTANT at each read
  kAverage,  ///< nvmlDeviceGetPowerUsage at each read: a one-second average on Ampere and newer
};
/// "energy", "instant", "average" or "auto"; InputError otherwise.
NvmlSource parse_nvml_source(const std::string& text);

/// Samples each GPU's power (channel = GPU index) every `interval_s` (default 50 ms). A source
/// the driver or GPU lacks is refused (DeviceError naming it); kAuto takes the best it has and
/// names it in the probe's location.
std::unique_ptr<Probe> open_nvml_probe(std::shared_ptr<Nvml> nvml, double interval_s,
                                       const Clock& clock, NvmlSource source = NvmlSource::kAuto);

}  // namespace ergon::probes
