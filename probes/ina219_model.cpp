#include "probes/ina219_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ergon::probes {

Ina219Model::Ina219Model(const Ina219Config& config) : config_(config) {
  const double cal = std::trunc(0.04096 / (config.current_lsb_a * config.shunt_ohm));
  assert(cal >= 2 && cal <= 65534 && "current LSB and shunt give a calibration out of range");
  calibration_ = static_cast<uint16_t>(static_cast<uint32_t>(cal) & 0xFFFEU);
}

Ina219Registers Ina219Model::convert(double bus_v, double current_a, double shunt_noise_v) const {
  Ina219Registers regs;
  regs.calibration = calibration_;
  bool overflow = false;

  double shunt_v = current_a * config_.shunt_ohm + shunt_noise_v;
  if (std::abs(shunt_v) > config_.shunt_range_v) {
    overflow = true;
    shunt_v = std::clamp(shunt_v, -config_.shunt_range_v, config_.shunt_range_v);
  }
  const auto shunt_raw = static_cast<int32_t>(std::lround(shunt_v / kShuntLsbV));
  regs.shunt = static_cast<int16_t>(shunt_raw);

  const double bus_clamped = std::clamp(bus_v, 0.0, 32.0);
  const auto bus_raw = static_cast<uint32_t>(std::lround(bus_clamped / kBusLsbV)) & 0x1FFFU;

  // Current register = shunt x calibration / 4096; power = current x bus / 5000 (datasheet
  // eq. 4 and 5), both truncated by the chip's integer arithmetic.
  int64_t current_raw = static_cast<int64_t>(shunt_raw) * calibration_ / 4096;
  if (current_raw > INT16_MAX || current_raw < INT16_MIN) {
    overflow = true;
    current_raw = std::clamp<int64_t>(current_raw, INT16_MIN, INT16_MAX);
  }
  regs.current = static_cast<int16_t>(current_raw);
  int64_t power_raw = std::abs(current_raw) * static_cast<int64_t>(bus_raw) / 5000;
  if (power_raw > UINT16_MAX) {
    overflow = true;
    power_raw = UINT16_MAX;
  }
  regs.power = static_cast<uint16_t>(power_raw);
  regs.bus = static_cast<uint16_t>((bus_raw << 3) | (1U << 1) | (overflow ? 1U : 0U));
  return regs;
}

PowerSample Ina219Model::decode(const Ina219Registers& regs, uint8_t rail,
                                uint64_t t_ticks) const {
  PowerSample s;
  s.rail = rail;
  s.t_ticks = t_ticks;
  s.bus_uv = static_cast<int32_t>((regs.bus >> 3) * 4000);
  s.current_ua = static_cast<int32_t>(std::lround(regs.current * config_.current_lsb_a * 1e6));
  s.power_uw = static_cast<int32_t>(std::lround(regs.power * 20.0 * config_.current_lsb_a * 1e6));
  if ((regs.bus & 1U) != 0) s.flags |= kSampleOverflow;
  if ((regs.bus & 2U) == 0) s.flags |= kSampleNotReady;
  return s;
}

}  // namespace ergon::probes
