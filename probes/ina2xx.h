#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "probes/i2c.h"
#include "probes/power.h"

namespace ergon::probes {

/// TI's current/power monitors of the INA2xx family that Ergon drives.
enum class Ina2xxChip { kIna219, kIna226, kIna260 };
std::string_view to_string(Ina2xxChip chip);
std::optional<Ina2xxChip> ina2xx_chip_from_name(std::string_view name);

/// Register addresses (the INA219 has no mask/enable or ID registers; the INA260 no shunt or
/// calibration register: its current register is at 0x01).
namespace ina2xx_reg {
inline constexpr uint8_t kConfig = 0x00;
inline constexpr uint8_t kShunt = 0x01;    ///< INA260: current
inline constexpr uint8_t kBus = 0x02;
inline constexpr uint8_t kPower = 0x03;
inline constexpr uint8_t kCurrent = 0x04;  ///< INA219, INA226
inline constexpr uint8_t kCalibration = 0x05;
inline constexpr uint8_t kMaskEnable = 0x06;
inline constexpr uint8_t kManufacturerId = 0xFE;
inline constexpr uint8_t kDieId = 0xFF;
}  // namespace ina2xx_reg

/// The fixed arithmetic of each chip (datasheets SBOS448, SBOS547, SBOS656).
struct Ina2xxSpec {
  Ina2xxChip chip;
  double shunt_lsb_v;        ///< 0 for the INA260 (no shunt register)
  double bus_lsb_v;
  int bus_shift;             ///< INA219: bits 15..3 hold the bus voltage
  double calibration_scale;  ///< cal = scale / (current LSB x shunt); 0: no calibration
  double current_per_cal;    ///< current register = shunt register x cal / this
  double power_lsb_factor;   ///< power LSB = this x current LSB
  double fixed_current_lsb_a;  ///< INA260: 1.25 mA; 0 otherwise
  double internal_shunt_ohm;   ///< INA260: 2 mOhm; 0 otherwise
  uint16_t die_id;             ///< 0: the chip has no ID registers
};
const Ina2xxSpec& ina2xx_spec(Ina2xxChip chip);

/// How the user wants the chip set up. Conversion settings not valid for the chip are refused.
struct Ina2xxConfig {
  Ina2xxChip chip = Ina2xxChip::kIna219;
  uint8_t address = 0x40;
  double shunt_ohm = 0.1;       ///< the board's shunt (the INA260's own is used instead)
  double max_current_a = 3.2;   ///< the largest current expected: sets the current LSB
  /// 0: max_current / 2^15 (the finest that covers it); else this rounder value (the
  /// datasheets' advice), which must not be finer.
  double current_lsb_a = 0;
  int bus_range_v = 32;         ///< INA219: 16 or 32
  double shunt_range_v = 0.32;  ///< INA219 PGA: 0.04, 0.08, 0.16 or 0.32
  int adc_bits = 12;            ///< INA219: 9 to 12 (with averages = 1)
  int averages = 1;             ///< INA219: 1 to 128; INA226/260: 1, 4, 16, 64 ... 1024
  /// INA226/260 conversion time per channel: 140e-6, 204e-6, 332e-6, 588e-6, 1.1e-3,
  /// 2.116e-3, 4.156e-3 or 8.244e-3 s.
  double conversion_time_s = 1.1e-3;
  bool triggered = false;  ///< one conversion per trigger instead of continuous
};

/// What the configuration means in registers and units, by the datasheet formulas.
struct Ina2xxSetup {
  uint16_t config = 0;       ///< the configuration register, mode bits included
  uint16_t calibration = 0;  ///< 0 for the INA260
  double current_lsb_a = 0;  ///< effective: what one count of the current register is worth
  double power_lsb_w = 0;
  double shunt_full_scale_v = 0;  ///< beyond it the shunt register saturates
  double sample_period_s = 0;     ///< one complete shunt + bus conversion, averages included
};
/// Throws InputError naming the setting the chip does not support, or a calibration out of
/// the register's range (shunt and current too small or too large for the chip).
Ina2xxSetup ina2xx_setup(const Ina2xxConfig& config);

/// The config with its conversion settings chosen for `rate_hz` complete samples a second:
/// the most averaging that still reaches the rate (less noise), or, for rate_hz <= 0, the
/// fastest setting a driver reading four registers at 400 kHz keeps up with (INA219: 12 bits,
/// 1.06 ms; INA226/260: 588 us a channel, 1.18 ms).
Ina2xxConfig with_rate(Ina2xxConfig config, double rate_hz);

/// What a configuration register value means: the time of one complete conversion (0 when
/// powered down), whether it converts continuously, and (INA219) the shunt and bus ranges.
struct Ina2xxMode {
  double sample_period_s = 0;
  bool continuous = false;
  bool triggered = false;
  double shunt_full_scale_v = 0;
  double bus_full_scale_v = 0;
};
Ina2xxMode ina2xx_mode(Ina2xxChip chip, uint16_t config);
/// The configuration register after a reset.
uint16_t ina2xx_reset_config(Ina2xxChip chip);

/// What one conversion leaves in the result registers (bus without the INA219's flag bits).
struct Ina2xxRegisters {
  uint16_t shunt = 0;    ///< INA260: its current register (0x01)
  uint16_t bus = 0;
  uint16_t power = 0;
  uint16_t current = 0;  ///< INA219, INA226
  bool overflow = false; ///< the chip's math overflow flag
};
/// The chip's own arithmetic on a true supply: the shunt voltage (noise added) quantized and
/// saturated at the range `config` sets, current = shunt x calibration / 4096 (2048), power =
/// current x bus / 5000 (20000; INA260: / 6400), truncated, with overflow where they leave
/// their registers. (The simulated chip and the board simulator both convert through this.)
Ina2xxRegisters ina2xx_convert(Ina2xxChip chip, uint16_t config, uint16_t calibration,
                               double shunt_ohm, double bus_v, double current_a,
                               double shunt_noise_v);
/// A sample from a conversion's registers: values by the LSBs, overflow flagged from the
/// chip's flag or a saturated shunt (INA260: current) register.
PowerSample ina2xx_decode(Ina2xxChip chip, double current_lsb_a, double shunt_full_scale_v,
                          const Ina2xxRegisters& regs, uint8_t rail, uint64_t t_ticks);

/// Driver for one chip on a bus: configures it, then reads complete conversions. Every read
/// is a real register transaction through the bus; a failed transaction throws DeviceError.
class Ina2xx {
 public:
  Ina2xx(I2cBus& bus, const Ina2xxConfig& config, const Clock& clock);

  /// Resets the chip, checks its ID (INA226/260), writes calibration and configuration and
  /// reads them back. Throws DeviceError when the chip is not what the config says.
  void configure();
  /// Triggered mode: starts one conversion.
  void trigger();
  /// The next complete conversion: sleeps until it is due, then polls the conversion-ready
  /// flag (a few times at most). Overflow (the chip's flag, or a saturated shunt register)
  /// is flagged, never silently clipped. t_ticks is the host clock (ns) at the read.
  PowerSample read_next(uint8_t rail = 0);

  [[nodiscard]] const Ina2xxSetup& setup() const { return setup_; }
  [[nodiscard]] const Ina2xxConfig& config() const { return config_; }
  /// Register transactions so far, and reads of the ready flag that found it clear.
  [[nodiscard]] uint64_t transactions() const { return transactions_; }
  [[nodiscard]] uint64_t not_ready_polls() const { return not_ready_polls_; }

  /// Decodes a conversion's registers into a sample (pure: the datasheet arithmetic).
  [[nodiscard]] PowerSample decode(uint16_t shunt_or_current, uint16_t bus, uint16_t power,
                                   uint16_t current, bool overflow, uint8_t rail,
                                   uint64_t t_ticks) const;

 private:
  uint16_t read(uint8_t reg);
  void write(uint8_t reg, uint16_t value);
  /// Reads the ready flag (clearing it on INA226/260); sets `overflow` from the same read.
  bool ready(bool& overflow);

  I2cBus& bus_;
  Ina2xxConfig config_;
  const Ina2xxSpec& spec_;
  Ina2xxSetup setup_;
  const Clock& clock_;
  int64_t next_due_ns_ = 0;
  uint64_t transactions_ = 0;
  uint64_t not_ready_polls_ = 0;
};

}  // namespace ergon::probes
