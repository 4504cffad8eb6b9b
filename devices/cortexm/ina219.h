#pragma once

// The firmware's INA219 driver: integer arithmetic only, over the HAL's I2C master. 32 V bus
// range, 320 mV shunt range, 12-bit conversions of shunt and bus, continuous: a new sample
// every 1.064 ms (532 us each), read when the conversion-ready flag says so.

#include <cstdint>

#include "devices/cortexm/hal.h"

namespace ergon::devices::cortexm {

struct Ina219Sample {
  int32_t bus_uv = 0;
  int32_t current_ua = 0;
  int32_t power_uw = 0;
  uint8_t flags = 0;  ///< probes::SampleFlag bits (overflow)
};

class Ina219 {
 public:
  static constexpr uint32_t kConversionUs = 1064;

  /// `i2c` null: no chip (start() and read() return false).
  Ina219(I2cMaster* i2c, const Ina219Config& config);
  /// Writes configuration and calibration and reads them back; false when the chip does not
  /// answer or holds other values.
  bool start();
  /// A new conversion since the last read, if any: false when none is ready yet or the bus
  /// failed (`failed()` tells which).
  bool read(Ina219Sample& out);
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] uint16_t calibration() const { return calibration_; }
  [[nodiscard]] uint32_t current_lsb_na() const { return current_lsb_na_; }

 private:
  bool read_register(uint8_t reg, uint16_t& value);
  bool write_register(uint8_t reg, uint16_t value);

  I2cMaster* i2c_;
  Ina219Config config_;
  uint32_t current_lsb_na_ = 0;
  uint16_t calibration_ = 0;
  bool failed_ = false;
};

}  // namespace ergon::devices::cortexm
