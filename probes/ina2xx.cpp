#include "probes/ina2xx.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/error.h"

namespace ergon::probes {
namespace {

namespace reg = ina2xx_reg;

constexpr uint16_t kTiManufacturerId = 0x5449;  // "TI"
constexpr uint16_t kReset = 0x8000;
constexpr uint16_t kModeContinuous = 0b111;     // shunt and bus, continuous
constexpr uint16_t kModeTriggered = 0b011;      // shunt and bus, one conversion per trigger
constexpr int kMaxNotReadyPolls = 40;

constexpr Ina2xxSpec kSpecs[] = {
    {Ina2xxChip::kIna219, 10e-6, 4e-3, 3, 0.04096, 4096, 20, 0, 0, 0},
    {Ina2xxChip::kIna226, 2.5e-6, 1.25e-3, 0, 0.00512, 2048, 25, 0, 0, 0x2260},
    {Ina2xxChip::kIna260, 0, 1.25e-3, 0, 0, 0, 8, 1.25e-3, 0.002, 0x2270},
};

// INA219 ADC settings (BADC/SADC): code and conversion time per channel.
struct AdcSetting {
  int bits;
  int averages;
  uint16_t code;
  double time_s;
};
constexpr AdcSetting kIna219Adc[] = {
    {9, 1, 0b0000, 84e-6},     {10, 1, 0b0001, 148e-6},   {11, 1, 0b0010, 276e-6},
    {12, 1, 0b0011, 532e-6},   {12, 2, 0b1001, 1.06e-3},  {12, 4, 0b1010, 2.13e-3},
    {12, 8, 0b1011, 4.26e-3},  {12, 16, 0b1100, 8.51e-3}, {12, 32, 0b1101, 17.02e-3},
    {12, 64, 0b1110, 34.05e-3}, {12, 128, 0b1111, 68.10e-3},
};
// INA226/INA260: averaging (AVG) and conversion time (VBUSCT, VSHCT/ISHCT) codes.
constexpr int kAverages[] = {1, 4, 16, 64, 128, 256, 512, 1024};
constexpr double kConversionTimes[] = {140e-6, 204e-6, 332e-6, 588e-6,
                                       1.1e-3, 2.116e-3, 4.156e-3, 8.244e-3};

std::string hex(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v);
  return buf;
}

std::string numbers(std::initializer_list<double> values) {
  std::string s;
  for (double v : values) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%g", s.empty() ? "" : ", ", v);
    s += buf;
  }
  return s;
}

}  // namespace

std::string_view to_string(Ina2xxChip chip) {
  switch (chip) {
    case Ina2xxChip::kIna219: return "ina219";
    case Ina2xxChip::kIna226: return "ina226";
    case Ina2xxChip::kIna260: return "ina260";
  }
  return "ina2xx";
}

std::optional<Ina2xxChip> ina2xx_chip_from_name(std::string_view name) {
  for (Ina2xxChip c : {Ina2xxChip::kIna219, Ina2xxChip::kIna226, Ina2xxChip::kIna260})
    if (to_string(c) == name) return c;
  return std::nullopt;
}

const Ina2xxSpec& ina2xx_spec(Ina2xxChip chip) {
  for (const Ina2xxSpec& s : kSpecs)
    if (s.chip == chip) return s;
  return kSpecs[0];
}

Ina2xxSetup ina2xx_setup(const Ina2xxConfig& c) {
  const Ina2xxSpec& spec = ina2xx_spec(c.chip);
  const std::string chip(to_string(c.chip));
  Ina2xxSetup s;
  const uint16_t mode = c.triggered ? kModeTriggered : kModeContinuous;
  if (!(c.max_current_a > 0)) throw InputError(chip + ": the expected maximum current must be > 0");

  if (c.chip == Ina2xxChip::kIna219) {
    uint16_t brng = 0;
    if (c.bus_range_v == 32) brng = 1;
    else if (c.bus_range_v != 16) throw InputError("ina219: bus range must be 16 or 32 V");
    const double ranges[] = {0.04, 0.08, 0.16, 0.32};
    int pg = -1;
    for (int i = 0; i < 4; ++i)
      if (std::abs(c.shunt_range_v - ranges[i]) < 1e-9) pg = i;
    if (pg < 0) throw InputError("ina219: shunt range must be one of 0.04, 0.08, 0.16, 0.32 V");
    const AdcSetting* adc = nullptr;
    for (const AdcSetting& a : kIna219Adc)
      if (a.bits == c.adc_bits && a.averages == c.averages) adc = &a;
    if (adc == nullptr)
      throw InputError("ina219: ADC must be 9, 10, 11 or 12 bits with 1 sample, or 12 bits "
                       "averaging 2, 4, 8, 16, 32, 64 or 128 samples");
    s.config = static_cast<uint16_t>(brng << 13 | pg << 11 | adc->code << 7 | adc->code << 3 | mode);
    s.sample_period_s = 2 * adc->time_s;
    s.shunt_full_scale_v = c.shunt_range_v;
  } else {
    int avg = -1, ct = -1;
    for (int i = 0; i < 8; ++i) {
      if (kAverages[i] == c.averages) avg = i;
      if (std::abs(kConversionTimes[i] - c.conversion_time_s) < 1e-9) ct = i;
    }
    if (avg < 0) throw InputError(chip + ": averages must be 1, 4, 16, 64, 128, 256, 512 or 1024");
    if (ct < 0)
      throw InputError(chip + ": conversion time must be one of " +
                       numbers({140e-6, 204e-6, 332e-6, 588e-6, 1.1e-3, 2.116e-3, 4.156e-3,
                                8.244e-3}) +
                       " s");
    // Bits 14..12 read back as the datasheet's reset value (INA226 100, INA260 110).
    const uint16_t fixed = c.chip == Ina2xxChip::kIna226 ? 0x4000 : 0x6000;
    s.config = static_cast<uint16_t>(fixed | avg << 9 | ct << 6 | ct << 3 | mode);
    s.sample_period_s = c.averages * 2 * c.conversion_time_s;
    s.shunt_full_scale_v = c.chip == Ina2xxChip::kIna226 ? 0.08192 : 15.0 * spec.internal_shunt_ohm;
  }

  if (spec.calibration_scale == 0) {  // INA260: fixed LSBs, its own shunt
    s.current_lsb_a = spec.fixed_current_lsb_a;
    if (c.max_current_a > 15)
      throw InputError("ina260: measures up to 15 A; expected maximum " +
                       numbers({c.max_current_a}) + " A");
  } else {
    if (!(c.shunt_ohm > 0)) throw InputError(chip + ": shunt resistance must be > 0");
    if (c.max_current_a * c.shunt_ohm > s.shunt_full_scale_v * (1 + 1e-9))
      throw InputError(chip + ": " + numbers({c.max_current_a}) + " A across " +
                       numbers({c.shunt_ohm}) + " ohm is " +
                       numbers({c.max_current_a * c.shunt_ohm * 1e3}) +
                       " mV, beyond the shunt range of " +
                       numbers({s.shunt_full_scale_v * 1e3}) + " mV" +
                       (c.chip == Ina2xxChip::kIna219 ? " (a larger shunt range, or a smaller shunt)"
                                                      : " (use a smaller shunt)"));
    // Datasheet: current LSB = max expected / 2^15; calibration = scale / (LSB x shunt),
    // truncated (the INA219 ignores bit 0). The LSB the chip then works with follows from
    // the integer it was given.
    const double finest_lsb = c.max_current_a / 32768;
    if (c.current_lsb_a > 0 && c.current_lsb_a < finest_lsb * (1 - 1e-12))
      throw InputError(chip + ": a current LSB of " + numbers({c.current_lsb_a}) +
                       " A cannot reach " + numbers({c.max_current_a}) + " A (at least " +
                       numbers({finest_lsb}) + " A)");
    const double lsb = c.current_lsb_a > 0 ? c.current_lsb_a : finest_lsb;
    const double cal = std::trunc(spec.calibration_scale / (lsb * c.shunt_ohm));
    const double max_cal = c.chip == Ina2xxChip::kIna219 ? 0xFFFE : 0x7FFF;
    if (cal < 2 || cal > max_cal)
      throw InputError(chip + ": a shunt of " + numbers({c.shunt_ohm}) + " ohm and " +
                       numbers({c.max_current_a}) + " A need a calibration of " +
                       numbers({cal}) + ", outside 2.." + numbers({max_cal}));
    s.calibration = static_cast<uint16_t>(c.chip == Ina2xxChip::kIna219
                                              ? static_cast<uint32_t>(cal) & 0xFFFEU
                                              : static_cast<uint32_t>(cal));
    s.current_lsb_a = spec.calibration_scale / (s.calibration * c.shunt_ohm);
  }
  s.power_lsb_w = spec.power_lsb_factor * s.current_lsb_a;
  return s;
}

Ina2xxConfig with_rate(Ina2xxConfig c, double rate_hz) {
  const double wanted_period_s = rate_hz > 0 ? 1.0 / rate_hz : 0;
  if (c.chip == Ina2xxChip::kIna219) {
    const AdcSetting* best = &kIna219Adc[3];  // 12 bits, one sample
    if (rate_hz > 0) {
      best = &kIna219Adc[0];  // 9 bits: the fastest there is
      for (const AdcSetting& a : kIna219Adc)
        if (2 * a.time_s <= wanted_period_s && 2 * a.time_s > 2 * best->time_s) best = &a;
    }
    c.adc_bits = best->bits;
    c.averages = best->averages;
    return c;
  }
  c.averages = 1;
  c.conversion_time_s = 588e-6;
  if (rate_hz > 0) {
    double best_period = 0;
    c.conversion_time_s = kConversionTimes[0];
    for (int avg : kAverages) {
      for (double ct : kConversionTimes) {
        const double period = avg * 2 * ct;
        if (period <= wanted_period_s && period > best_period) {
          best_period = period;
          c.averages = avg;
          c.conversion_time_s = ct;
        }
      }
    }
  }
  return c;
}

Ina2xxMode ina2xx_mode(Ina2xxChip chip, uint16_t config) {
  Ina2xxMode m;
  const unsigned mode = config & 0b111U;
  m.continuous = mode >= 0b101;
  m.triggered = mode >= 0b001 && mode <= 0b011;
  if (chip == Ina2xxChip::kIna219) {
    auto adc_time = [](unsigned code) {
      if ((code & 0b1000U) == 0) code &= 0b0011U;  // 0X00..0X11: 9 to 12 bits
      for (const AdcSetting& a : kIna219Adc)
        if (a.code == code) return a.time_s;
      return kIna219Adc[3].time_s;  // 0b1000: 12 bits
    };
    m.sample_period_s = adc_time((config >> 7) & 0xFU) + adc_time((config >> 3) & 0xFU);
    m.shunt_full_scale_v = 0.04 * (1U << ((config >> 11) & 0b11U));
    m.bus_full_scale_v = (config & (1U << 13)) != 0 ? 32 : 16;
  } else {
    const int avg = kAverages[(config >> 9) & 0b111U];
    m.sample_period_s = avg * (kConversionTimes[(config >> 6) & 0b111U] +
                               kConversionTimes[(config >> 3) & 0b111U]);
    m.shunt_full_scale_v = chip == Ina2xxChip::kIna226 ? 0.08192 : 0.03;
    m.bus_full_scale_v = 40.96;
  }
  if (!m.continuous && !m.triggered) m.sample_period_s = 0;
  return m;
}

uint16_t ina2xx_reset_config(Ina2xxChip chip) {
  switch (chip) {
    case Ina2xxChip::kIna219: return 0x399F;
    case Ina2xxChip::kIna226: return 0x4127;
    case Ina2xxChip::kIna260: return 0x6127;
  }
  return 0;
}

Ina2xx::Ina2xx(I2cBus& bus, const Ina2xxConfig& config, const Clock& clock)
    : bus_(bus), config_(config), spec_(ina2xx_spec(config.chip)), setup_(ina2xx_setup(config)),
      clock_(clock) {}

uint16_t Ina2xx::read(uint8_t r) {
  ++transactions_;
  return read_register(bus_, config_.address, r);
}

void Ina2xx::write(uint8_t r, uint16_t value) {
  ++transactions_;
  write_register(bus_, config_.address, r, value);
}

void Ina2xx::configure() {
  const std::string chip(to_string(config_.chip));
  const std::string where = " at " + hex(config_.address) + " on " + bus_.name();
  if (spec_.die_id != 0) {
    const uint16_t maker = read(reg::kManufacturerId);
    const uint16_t die = read(reg::kDieId);
    if (maker != kTiManufacturerId || die != spec_.die_id)
      throw DeviceError("the chip" + where + " is not an " + chip + " (manufacturer " +
                        hex(maker) + ", die " + hex(die) + ")");
  }
  write(reg::kConfig, kReset);
  if (setup_.calibration != 0) write(reg::kCalibration, setup_.calibration);
  write(reg::kConfig, setup_.config);
  const uint16_t config_back = read(reg::kConfig);
  const uint16_t cal_back = setup_.calibration != 0 ? read(reg::kCalibration) : 0;
  if (config_back != setup_.config || cal_back != setup_.calibration)
    throw DeviceError(chip + where + " did not keep its settings (configuration " +
                      hex(config_back) + ", calibration " + hex(cal_back) +
                      "): is it the chip you named?");
  next_due_ns_ = clock_.now_ns() + static_cast<int64_t>(setup_.sample_period_s * 1e9);
}

void Ina2xx::trigger() {
  write(reg::kConfig, setup_.config);  // in triggered mode, writing the mode starts one
  next_due_ns_ = clock_.now_ns() + static_cast<int64_t>(setup_.sample_period_s * 1e9);
}

bool Ina2xx::ready(bool& overflow) {
  if (config_.chip == Ina2xxChip::kIna219) {
    const uint16_t bus = read(reg::kBus);
    overflow = (bus & 1U) != 0;
    return (bus & 2U) != 0;
  }
  const uint16_t mask = read(reg::kMaskEnable);  // reading it clears the ready flag
  overflow = (mask & (1U << 2)) != 0;
  return (mask & (1U << 3)) != 0;
}

PowerSample Ina2xx::read_next(uint8_t rail) {
  const auto period_ns = static_cast<int64_t>(setup_.sample_period_s * 1e9);
  // A phase-locked loop on the chip's own oscillator: sleep until the conversion is due, then
  // poll the ready flag in steps of 1/32 of a period. Finding it clear means we are early and
  // the edge lies within the last step: lock to it, aiming a step early next time. Finding it
  // set at once means we may be late: pull the schedule in. The schedule never follows the
  // time the register reads took, so it does not drift behind the chip.
  const int64_t step_ns = std::max<int64_t>(period_ns / 32, 1000);
  clock_.sleep_until_ns(next_due_ns_);
  bool overflow = false;
  int polls = 0;
  for (; !ready(overflow); ++polls) {
    ++not_ready_polls_;
    if (polls >= kMaxNotReadyPolls + 32)
      throw DeviceError(std::string(to_string(config_.chip)) + " at " + hex(config_.address) +
                        " on " + bus_.name() + " finished no conversion in " +
                        std::to_string(((kMaxNotReadyPolls + 32) * step_ns) / 1'000'000 + 1) +
                        " ms (powered down, or reset?)");
    clock_.sleep_until_ns(clock_.now_ns() + step_ns);
  }
  const int64_t ready_ns = clock_.now_ns();
  next_due_ns_ = polls == 0 ? next_due_ns_ + period_ns - 2 * step_ns
                            : ready_ns + period_ns - step_ns;
  uint16_t bus = 0, power = 0, current = 0, first = 0;
  if (config_.chip == Ina2xxChip::kIna219) {
    first = read(reg::kShunt);
    bus = read(reg::kBus);
    current = read(reg::kCurrent);
    power = read(reg::kPower);  // clears the ready flag
  } else {
    first = read(reg::kShunt);  // INA260: the current register
    bus = read(reg::kBus);
    power = read(reg::kPower);
    current = config_.chip == Ina2xxChip::kIna226 ? read(reg::kCurrent) : first;
  }
  return decode(first, bus, power, current, overflow, rail, static_cast<uint64_t>(ready_ns));
}

PowerSample Ina2xx::decode(uint16_t shunt_or_current, uint16_t bus, uint16_t power,
                           uint16_t current, bool overflow, uint8_t rail, uint64_t t_ticks) const {
  return ina2xx_decode(config_.chip, setup_.current_lsb_a, setup_.shunt_full_scale_v,
                       {shunt_or_current, bus, power, current, overflow}, rail, t_ticks);
}

PowerSample ina2xx_decode(Ina2xxChip chip, double current_lsb_a, double shunt_full_scale_v,
                          const Ina2xxRegisters& regs, uint8_t rail, uint64_t t_ticks) {
  const Ina2xxSpec& spec = ina2xx_spec(chip);
  PowerSample s;
  s.rail = rail;
  s.t_ticks = t_ticks;
  const auto first = static_cast<int16_t>(regs.shunt);
  s.bus_uv = static_cast<int32_t>(std::lround((regs.bus >> spec.bus_shift) * spec.bus_lsb_v * 1e6));
  s.current_ua =
      static_cast<int32_t>(std::lround(static_cast<int16_t>(regs.current) * current_lsb_a * 1e6));
  s.power_uw = static_cast<int32_t>(
      std::lround(regs.power * spec.power_lsb_factor * current_lsb_a * 1e6));
  // A saturated shunt (or INA260 current) register means the true value lies beyond it: the
  // chip's math overflow flag does not always say so.
  int saturated_counts = 0x7FFF;
  if (spec.shunt_lsb_v > 0)
    saturated_counts = std::min<int>(
        0x7FFF, static_cast<int>(std::lround(shunt_full_scale_v / spec.shunt_lsb_v)));
  const bool ina219_ovf = chip == Ina2xxChip::kIna219 && (regs.bus & 1U) != 0;
  if (regs.overflow || ina219_ovf || std::abs(static_cast<int>(first)) >= saturated_counts)
    s.flags |= kSampleOverflow;
  return s;
}

Ina2xxRegisters ina2xx_convert(Ina2xxChip chip, uint16_t config, uint16_t calibration,
                               double shunt_ohm, double bus_v, double current_a,
                               double shunt_noise_v) {
  const Ina2xxSpec& spec = ina2xx_spec(chip);
  const Ina2xxMode mode = ina2xx_mode(chip, config);
  auto clamp_round = [](double v, int64_t lo, int64_t hi) {
    return std::clamp<int64_t>(std::llround(v), lo, hi);
  };
  Ina2xxRegisters r;
  const double shunt_v = current_a * shunt_ohm + shunt_noise_v;
  const int64_t bus = clamp_round(std::clamp(bus_v, 0.0, mode.bus_full_scale_v) / spec.bus_lsb_v, 0,
                                  chip == Ina2xxChip::kIna219 ? 0x1FFF : 0x7FFF);
  int64_t current = 0;
  int64_t power = 0;
  if (chip == Ina2xxChip::kIna260) {
    // Current straight from the internal shunt, 1.25 mA a count; power 10 mW a count.
    current = clamp_round(shunt_v / shunt_ohm / spec.fixed_current_lsb_a, -0x8000, 0x7FFF);
    r.shunt = static_cast<uint16_t>(static_cast<int16_t>(current));
    power = std::llabs(current) * bus / 6400;
  } else {
    const auto fs = static_cast<int64_t>(std::lround(mode.shunt_full_scale_v / spec.shunt_lsb_v));
    const int64_t shunt = clamp_round(shunt_v / spec.shunt_lsb_v, -std::min<int64_t>(fs, 0x8000),
                                      std::min<int64_t>(fs, 0x7FFF));
    r.shunt = static_cast<uint16_t>(static_cast<int16_t>(shunt));
    current = shunt * calibration / static_cast<int64_t>(spec.current_per_cal);
    if (current > INT16_MAX || current < INT16_MIN) {
      r.overflow = true;
      current = std::clamp<int64_t>(current, INT16_MIN, INT16_MAX);
    }
    power = std::llabs(current) * bus / (chip == Ina2xxChip::kIna219 ? 5000 : 20000);
  }
  if (power > 0xFFFF) {
    r.overflow = true;
    power = 0xFFFF;
  }
  r.power = static_cast<uint16_t>(power);
  r.current = static_cast<uint16_t>(static_cast<int16_t>(current));
  r.bus = static_cast<uint16_t>(bus << spec.bus_shift);
  return r;
}

}  // namespace ergon::probes
