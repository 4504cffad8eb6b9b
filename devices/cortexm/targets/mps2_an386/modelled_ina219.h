#pragma once

// A TI INA219 modelled at the register level inside the MPS2 AN386 image: QEMU's MPS2 has no
// I2C power monitor, so the target's I2C master talks to this model instead of a chip, and
// the firmware's own INA219 driver (ina219.h) drives it as it drives the real one. It is the
// firmware-side counterpart of the host HAL's simulated chip (probes::SimIna2xx, which needs
// the heap, std::function and exceptions, so it cannot be linked here) and follows the same
// datasheet (SBOS448) rules with integer arithmetic only:
//   - a pointer register; configuration (reset value 0x399F, bit 15 resets the chip) and
//     calibration (bit 0 reads as 0) as written;
//   - conversions on the chip's own schedule from the tick clock: continuous from the last
//     configuration write (shunt and bus ADC times from BADC/SADC, 532 us each at 12 bits),
//     or one per write in triggered mode; between conversions the registers hold the last
//     result, so a driver that reads too slowly loses conversions, as on the chip;
//   - each conversion quantizes the true shunt voltage (10 uV, saturating at the PGA range),
//     the bus voltage (4 mV), and computes current = shunt x calibration / 4096 and power =
//     current x bus / 5000, truncated, with OVF where they leave their registers;
//   - CNVR (bus register bit 1) set by a conversion, cleared by reading power or writing the
//     configuration.
// The true supply comes from a callback (the HAL's: what the firmware is doing), with
// Gaussian-like shunt noise (sum of twelve uniforms) of a given standard deviation.

#include <cstddef>
#include <cstdint>

#include "devices/cortexm/hal.h"

namespace ergon::devices::cortexm {

/// What flows through the shunt at an instant.
struct ModelledSupply {
  uint32_t bus_uv = 0;
  int32_t current_na = 0;
};

/// The supply a board draws at `power_uw` from a `bus_uv` source through `source_mohm`: the
/// same model as devices::supply_reading (the bus sags by the source resistance), solved in
/// its cancellation-free form I = 2P / (V + sqrt(V^2 - 4RP)). constexpr: the firmware only
/// carries the results.
constexpr ModelledSupply supply_at(uint64_t power_uw, uint32_t bus_uv, uint32_t source_mohm) {
  const double v = bus_uv * 1e-6, r = source_mohm * 1e-3, p = static_cast<double>(power_uw) * 1e-6;
  double disc = v * v - 4 * r * p;
  if (disc < 0) disc = 0;
  double root = disc > 1 ? disc : 1;  // Newton's iteration for sqrt(disc)
  for (int i = 0; i < 60; ++i) root = disc == 0 ? 0 : 0.5 * (root + disc / root);
  const double current = 2 * p / (v + root);
  return {.bus_uv = static_cast<uint32_t>((v - r * current) * 1e6 + 0.5),
          .current_na = static_cast<int32_t>(current * 1e9 + 0.5)};
}

class ModelledIna219 {
 public:
  using Source = ModelledSupply (*)(void* context);

  ModelledIna219(TickClock& clock, uint32_t shunt_mohm, uint32_t shunt_noise_nv, Source source,
                 void* context)
      : clock_(clock), shunt_mohm_(shunt_mohm), noise_nv_(shunt_noise_nv), source_(source),
        context_(context) {
    reset(clock_.now_ticks());
  }

  /// An I2C write: the pointer register, then (with two more bytes) a register value.
  void on_write(const uint8_t* data, std::size_t n) {
    if (n == 0) return;
    const uint64_t now = clock_.now_ticks();
    update(now);
    pointer_ = data[0];
    if (n < 3) return;
    const auto v = static_cast<uint16_t>(data[1] << 8 | data[2]);
    if (pointer_ == kConfig) {
      if ((v & 0x8000U) != 0) return reset(now);
      config_ = v;
      ready_ = false;  // writing the configuration clears CNVR and restarts conversions
      start_ = now;
      converted_k_ = 0;
      const uint32_t mode = config_ & 0b111U;
      trigger_done_ = mode >= 0b001 && mode <= 0b011 ? now + period_ticks() : 0;
    } else if (pointer_ == kCalibration) {
      calibration_ = static_cast<uint16_t>(v & 0xFFFEU);
    }
  }

  /// An I2C read of the register the pointer names (big-endian).
  void on_read(uint8_t* out, std::size_t n) {
    update(clock_.now_ticks());
    const uint16_t v = value(pointer_);
    if (n >= 1) out[0] = static_cast<uint8_t>(v >> 8);
    if (n >= 2) out[1] = static_cast<uint8_t>(v & 0xFF);
  }

  /// Conversions completed so far.
  [[nodiscard]] uint64_t conversions() const { return conversions_; }

 private:
  static constexpr uint8_t kConfig = 0, kShunt = 1, kBus = 2, kPower = 3, kCurrent = 4, kCalibration = 5;

  /// One ADC's conversion time (BADC or SADC field), microseconds x 100.
  static uint32_t adc_time_cus(uint32_t code) {
    static constexpr uint32_t kSingle[4] = {8'400, 14'800, 27'600, 53'200};  // 9 to 12 bits
    static constexpr uint32_t kAveraged[8] = {53'200, 106'000, 213'000, 426'000,
                                              851'000, 1'702'000, 3'405'000, 6'810'000};  // 1 to 128
    return (code & 0b1000U) == 0 ? kSingle[code & 0b11U] : kAveraged[code & 0b111U];
  }
  [[nodiscard]] uint64_t period_ticks() const {
    const uint64_t cus = adc_time_cus((config_ >> 7) & 0xFU) + adc_time_cus((config_ >> 3) & 0xFU);
    return cus * clock_.tick_hz() / 100'000'000U;
  }

  void reset(uint64_t now) {
    config_ = 0x399F;
    calibration_ = 0;
    shunt_ = bus_ = power_ = current_ = 0;
    ready_ = overflow_ = false;
    start_ = now;
    converted_k_ = 0;
    trigger_done_ = 0;
  }

  void update(uint64_t now) {
    const uint32_t mode = config_ & 0b111U;
    if (mode >= 0b101) {  // continuous
      const uint64_t period = period_ticks();
      const uint64_t k = period == 0 ? 0 : (now - start_) / period;
      if (k > converted_k_) {
        convert();  // earlier conversions were overwritten unread
        conversions_ += k - converted_k_;
        converted_k_ = k;
      }
    } else if (trigger_done_ != 0 && now >= trigger_done_) {
      convert();
      ++conversions_;
      trigger_done_ = 0;
    }
  }

  /// Approximately normal, mean 0, standard deviation `sigma` (Irwin-Hall, twelve uniforms).
  int64_t noise(uint32_t sigma) {
    if (sigma == 0) return 0;
    int64_t sum = 0;
    for (int i = 0; i < 12; ++i) {
      rng_ ^= rng_ << 13;
      rng_ ^= rng_ >> 17;
      rng_ ^= rng_ << 5;
      sum += rng_ >> 16;
    }
    return (sum - 6 * 65536) * static_cast<int64_t>(sigma) / 65536;
  }

  /// Divides rounding half away from zero (llround's rule).
  static int64_t div_round(int64_t num, int64_t den) {
    return num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
  }
  static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

  void convert() {
    const ModelledSupply truth = source_(context_);
    // Shunt: 10 uV a count, saturating at the PGA range (40 mV x 2^PG).
    const int64_t shunt_nv = int64_t{truth.current_na} * shunt_mohm_ / 1000 + noise(noise_nv_);
    const int64_t full_scale = int64_t{4000} << ((config_ >> 11) & 0b11U);
    const int64_t shunt = clamp(div_round(shunt_nv, 10'000), -(full_scale < 0x8000 ? full_scale : 0x8000),
                                full_scale < 0x7FFF ? full_scale : 0x7FFF);
    // Bus: 4 mV a count, 13 bits, within the 16 or 32 V range.
    const int64_t bus_full_scale_uv = (config_ & (1U << 13)) != 0 ? 32'000'000 : 16'000'000;
    const int64_t bus = clamp(div_round(clamp(truth.bus_uv, 0, bus_full_scale_uv), 4000), 0, 0x1FFF);
    int64_t current = shunt * calibration_ / 4096;  // truncated, as the chip does
    overflow_ = false;
    if (current > INT16_MAX || current < INT16_MIN) {
      overflow_ = true;
      current = clamp(current, INT16_MIN, INT16_MAX);
    }
    int64_t power = (current < 0 ? -current : current) * bus / 5000;
    if (power > 0xFFFF) {
      overflow_ = true;
      power = 0xFFFF;
    }
    shunt_ = static_cast<uint16_t>(static_cast<int16_t>(shunt));
    bus_ = static_cast<uint16_t>(bus << 3);
    current_ = static_cast<uint16_t>(static_cast<int16_t>(current));
    power_ = static_cast<uint16_t>(power);
    ready_ = true;
  }

  uint16_t value(uint8_t reg) {
    switch (reg) {
      case kConfig: return config_;
      case kShunt: return shunt_;
      case kBus: return static_cast<uint16_t>(bus_ | (ready_ ? 2U : 0U) | (overflow_ ? 1U : 0U));
      case kPower:
        ready_ = false;  // reading power clears CNVR
        return power_;
      case kCurrent: return current_;
      case kCalibration: return calibration_;
      default: return 0;
    }
  }

  TickClock& clock_;
  uint32_t shunt_mohm_, noise_nv_;
  Source source_;
  void* context_;
  uint32_t rng_ = 0x2545F491;
  uint8_t pointer_ = 0;
  uint16_t config_ = 0x399F, calibration_ = 0;
  uint16_t shunt_ = 0, bus_ = 0, power_ = 0, current_ = 0;
  bool ready_ = false, overflow_ = false;
  uint64_t start_ = 0, converted_k_ = 0, trigger_done_ = 0, conversions_ = 0;
};

}  // namespace ergon::devices::cortexm
