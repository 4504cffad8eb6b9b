#include "probes/sim_ina2xx.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace ergon::probes {
namespace {

namespace reg = ina2xx_reg;

}  // namespace

SimIna2xx::SimIna2xx(Ina2xxChip chip, double shunt_ohm, SupplySource source,
                     double shunt_noise_v, uint64_t seed)
    : chip_(chip), shunt_ohm_(chip == Ina2xxChip::kIna260 ? ina2xx_spec(chip).internal_shunt_ohm
                                                           : shunt_ohm),
      source_(std::move(source)), shunt_noise_v_(shunt_noise_v), rng_(seed) {
  reset(0);
}

void SimIna2xx::reset(int64_t now_ns) {
  config_ = ina2xx_reset_config(chip_);
  calibration_ = 0;
  shunt_ = bus_ = power_ = current_ = 0;
  ready_ = overflow_ = false;
  start_ns_ = now_ns;
  converted_k_ = 0;
  trigger_done_ns_ = -1;
}

void SimIna2xx::update(int64_t now_ns) {
  const Ina2xxMode mode = ina2xx_mode(chip_, config_);
  if (mode.sample_period_s <= 0) return;
  const auto period_ns = static_cast<int64_t>(mode.sample_period_s * 1e9);
  if (mode.continuous) {
    const int64_t k = (now_ns - start_ns_) / period_ns;
    if (k > converted_k_) {
      convert(start_ns_ + k * period_ns);  // earlier conversions were overwritten unread
      conversions_ += static_cast<uint64_t>(k - converted_k_);
      converted_k_ = k;
    }
  } else if (trigger_done_ns_ >= 0 && now_ns >= trigger_done_ns_) {
    convert(trigger_done_ns_);
    ++conversions_;
    trigger_done_ns_ = -1;
  }
}

void SimIna2xx::convert(int64_t t_ns) {
  const SupplyState truth = source_(t_ns);
  last_truth_ = truth;
  std::normal_distribution<double> noise(0.0, shunt_noise_v_);
  const Ina2xxRegisters r = ina2xx_convert(chip_, config_, calibration_, shunt_ohm_, truth.bus_v,
                                           truth.current_a,
                                           shunt_noise_v_ > 0 ? noise(rng_) : 0.0);
  shunt_ = r.shunt;
  bus_ = r.bus;
  power_ = r.power;
  current_ = r.current;
  overflow_ = r.overflow;
  ready_ = true;
}

uint16_t SimIna2xx::value(uint8_t r) {
  const bool ina219 = chip_ == Ina2xxChip::kIna219;
  switch (r) {
    case reg::kConfig: return config_;
    case reg::kShunt: return shunt_;
    case reg::kBus:
      return ina219 ? static_cast<uint16_t>(bus_ | (ready_ ? 2U : 0U) | (overflow_ ? 1U : 0U)) : bus_;
    case reg::kPower:
      if (ina219) ready_ = false;  // reading power clears CNVR
      return power_;
    case reg::kCurrent: return chip_ == Ina2xxChip::kIna260 ? 0 : current_;
    case reg::kCalibration: return chip_ == Ina2xxChip::kIna260 ? 0 : calibration_;
    case reg::kMaskEnable: {
      if (ina219) return 0;
      const auto v = static_cast<uint16_t>((ready_ ? 1U << 3 : 0U) | (overflow_ ? 1U << 2 : 0U));
      ready_ = false;  // reading mask/enable clears CVRF
      return v;
    }
    case reg::kManufacturerId: return ina219 ? 0 : 0x5449;
    case reg::kDieId: return ina2xx_spec(chip_).die_id;
    default: return 0;
  }
}

void SimIna2xx::on_write(std::span<const uint8_t> data, int64_t now_ns) {
  if (data.empty()) return;
  update(now_ns);
  pointer_ = data[0];
  if (data.size() < 3) return;  // a pointer write only
  const auto v = static_cast<uint16_t>(data[1] << 8 | data[2]);
  if (pointer_ == reg::kConfig) {
    if ((v & 0x8000U) != 0) return reset(now_ns);
    config_ = chip_ == Ina2xxChip::kIna219 ? v : static_cast<uint16_t>(v | (config_ & 0x7000U));
    ready_ = false;  // writing the configuration clears the ready flag
    start_ns_ = now_ns;
    converted_k_ = 0;
    const Ina2xxMode mode = ina2xx_mode(chip_, config_);
    trigger_done_ns_ = mode.triggered
                           ? now_ns + static_cast<int64_t>(mode.sample_period_s * 1e9)
                           : -1;
  } else if (pointer_ == reg::kCalibration && chip_ != Ina2xxChip::kIna260) {
    calibration_ = chip_ == Ina2xxChip::kIna219 ? static_cast<uint16_t>(v & 0xFFFEU)
                                                 : static_cast<uint16_t>(v & 0x7FFFU);
  }
}

void SimIna2xx::on_read(std::span<uint8_t> out, int64_t now_ns) {
  update(now_ns);
  const uint16_t v = value(pointer_);
  if (out.size() >= 1) out[0] = static_cast<uint8_t>(v >> 8);
  if (out.size() >= 2) out[1] = static_cast<uint8_t>(v & 0xFF);
}

SimI2cBus::SimI2cBus(const Clock& clock, double bus_hz, std::string name)
    : clock_(clock), bus_hz_(bus_hz), name_(std::move(name)) {}

SimIna2xx& SimI2cBus::chip_at(uint8_t address, std::size_t bytes) {
  ++transactions_;
  // Start, address, data bytes (9 bits each with the acknowledgement), stop.
  if (spend) spend(static_cast<int64_t>((2 + 9.0 * static_cast<double>(bytes + 1)) / bus_hz_ * 1e9));
  char where[64];
  std::snprintf(where, sizeof where, "0x%02X on %s", address, name_.c_str());
  if (fail_next_ > 0) {
    --fail_next_;
    throw DeviceError(std::string("I2C transfer to ") + where + " failed: no acknowledgement");
  }
  const auto found = chips_.find(address);
  if (found == chips_.end())
    throw DeviceError(std::string("I2C transfer to ") + where +
                      " failed: no device answered at that address");
  return *found->second;
}

void SimI2cBus::write(uint8_t address, std::span<const uint8_t> data) {
  SimIna2xx& chip = chip_at(address, data.size());
  chip.on_write(data, clock_.now_ns());
}

void SimI2cBus::write_read(uint8_t address, std::span<const uint8_t> out, std::span<uint8_t> in) {
  SimIna2xx& chip = chip_at(address, out.size() + in.size() + 1);
  chip.on_write(out, clock_.now_ns());
  chip.on_read(in, clock_.now_ns());
}

}  // namespace ergon::probes
