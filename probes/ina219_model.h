#pragma once

#include <cstdint>

#include "probes/power.h"

namespace ergon::probes {

/// Register arithmetic of a TI INA219 (datasheet SBOS448): what the chip reports for a given
/// true bus voltage and current, with its quantization, calibration and overflow. The board
/// simulator measures through this model; the INA219 driver (probes issue) decodes the same
/// registers.
struct Ina219Config {
  double shunt_ohm = 0.1;
  double current_lsb_a = 100e-6;     ///< chosen by the user; sets the calibration register
  double shunt_range_v = 0.32;       ///< PGA /8: +-320 mV
  double conversion_time_s = 532e-6; ///< 12-bit, one sample, per channel (shunt and bus)
};

struct Ina219Registers {
  int16_t shunt = 0;        ///< 0x01, LSB 10 uV
  uint16_t bus = 0;         ///< 0x02, bits 15..3 = voltage (LSB 4 mV), bit 1 CNVR, bit 0 OVF
  uint16_t power = 0;       ///< 0x03, LSB 20 x current LSB
  int16_t current = 0;      ///< 0x04, LSB current_lsb_a
  uint16_t calibration = 0; ///< 0x05
};

class Ina219Model {
 public:
  static constexpr double kShuntLsbV = 10e-6;
  static constexpr double kBusLsbV = 4e-3;

  explicit Ina219Model(const Ina219Config& config);

  /// calibration = trunc(0.04096 / (current_LSB x R_shunt)), bit 0 always clear.
  [[nodiscard]] uint16_t calibration() const { return calibration_; }
  /// Time between two complete (shunt + bus) samples in continuous mode.
  [[nodiscard]] double sample_period_s() const { return 2.0 * config_.conversion_time_s; }

  /// The registers after one conversion of a true bus voltage and current.
  /// shunt_noise_v is added to the true shunt voltage before quantization.
  [[nodiscard]] Ina219Registers convert(double bus_v, double current_a,
                                        double shunt_noise_v) const;

  /// What a driver makes of those registers.
  [[nodiscard]] PowerSample decode(const Ina219Registers& regs, uint8_t rail,
                                   uint64_t t_ticks) const;

 private:
  Ina219Config config_;
  uint16_t calibration_ = 0;
};

}  // namespace ergon::probes
