#include "probes/ina219_model.h"

#include "probes/ina2xx.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ergon::probes {

Ina219Model::Ina219Model(const Ina219Config& config) : config_(config) {
  const double cal = std::trunc(0.04096 / (config.current_lsb_a * config.shunt_ohm));
  assert(cal >= 2 && cal <= 65534 && "current LSB and shunt give a calibration out of range");
  calibration_ = static_cast<uint16_t>(static_cast<uint32_t>(cal) & 0xFFFEU);
}

namespace {

/// The INA219 configuration the model stands for: 32 V bus range, its PGA range, 12 bits,
/// continuous.
uint16_t config_of(const Ina219Config& c) {
  int pg = 0;
  while (pg < 3 && 0.04 * (1 << pg) < c.shunt_range_v - 1e-12) ++pg;
  return static_cast<uint16_t>(1U << 13 | pg << 11 | 0b0011U << 7 | 0b0011U << 3 | 0b111U);
}

}  // namespace

Ina219Registers Ina219Model::convert(double bus_v, double current_a, double shunt_noise_v) const {
  const Ina2xxRegisters r = ina2xx_convert(Ina2xxChip::kIna219, config_of(config_), calibration_,
                                           config_.shunt_ohm, bus_v, current_a, shunt_noise_v);
  Ina219Registers regs;
  regs.calibration = calibration_;
  regs.shunt = static_cast<int16_t>(r.shunt);
  regs.current = static_cast<int16_t>(r.current);
  regs.power = r.power;
  // A conversion just completed (CNVR); OVF as the chip sets it.
  regs.bus = static_cast<uint16_t>(r.bus | 1U << 1 | (r.overflow ? 1U : 0U));
  return regs;
}

PowerSample Ina219Model::decode(const Ina219Registers& regs, uint8_t rail,
                                uint64_t t_ticks) const {
  PowerSample s = ina2xx_decode(
      Ina2xxChip::kIna219, config_.current_lsb_a, config_.shunt_range_v,
      {static_cast<uint16_t>(regs.shunt), regs.bus, regs.power, static_cast<uint16_t>(regs.current),
       false},
      rail, t_ticks);
  if ((regs.bus & 2U) == 0) s.flags |= kSampleNotReady;
  return s;
}

}  // namespace ergon::probes
