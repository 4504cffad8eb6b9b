#include "devices/cortexm/ina219.h"

namespace ergon::devices::cortexm {
namespace {

constexpr uint8_t kConfig = 0x00, kBus = 0x02, kPower = 0x03, kCurrent = 0x04, kCalibration = 0x05;
// BRNG 32 V, PGA /8 (320 mV), 12-bit bus and shunt ADCs, shunt and bus continuous.
constexpr uint16_t kConfigValue = 0x2000 | 0x1800 | (0x3 << 7) | (0x3 << 3) | 0x7;
constexpr uint8_t kOverflowFlag = 1;  // probes::SampleFlag::kOverflow

}  // namespace

Ina219::Ina219(I2cMaster* i2c, const Ina219Config& config) : i2c_(i2c), config_(config) {
  // The smallest current LSB that still reaches max_current at full scale (2^15 counts).
  current_lsb_na_ = static_cast<uint32_t>((uint64_t{config.max_current_ma} * 1'000'000 + 32767) / 32768);
  if (current_lsb_na_ == 0) current_lsb_na_ = 1;
  // Datasheet: cal = trunc(0.04096 / (current_lsb [A] x shunt [ohm])).
  const uint64_t cal = 40'960'000'000ULL / (uint64_t{current_lsb_na_} * (config.shunt_milliohm == 0 ? 1 : config.shunt_milliohm));
  calibration_ = static_cast<uint16_t>((cal > 0xFFFE ? 0xFFFE : cal) & 0xFFFE);  // bit 0 is not used
}

bool Ina219::write_register(uint8_t reg, uint16_t value) {
  const uint8_t tx[3] = {reg, static_cast<uint8_t>(value >> 8), static_cast<uint8_t>(value)};
  return i2c_ != nullptr && i2c_->transfer(config_.address, tx, 3, nullptr, 0);
}

bool Ina219::read_register(uint8_t reg, uint16_t& value) {
  uint8_t rx[2] = {};
  if (i2c_ == nullptr || !i2c_->transfer(config_.address, &reg, 1, rx, 2)) return false;
  value = static_cast<uint16_t>(rx[0] << 8 | rx[1]);
  return true;
}

bool Ina219::start() {
  uint16_t config = 0, cal = 0;
  failed_ = !(write_register(kConfig, kConfigValue) && write_register(kCalibration, calibration_) &&
              read_register(kConfig, config) && read_register(kCalibration, cal));
  return !failed_ && config == kConfigValue && cal == calibration_;
}

bool Ina219::read(Ina219Sample& out) {
  uint16_t bus = 0;
  failed_ = !read_register(kBus, bus);
  if (failed_ || (bus & 0x2) == 0) return false;  // CNVR: a conversion completed
  uint16_t current = 0, power = 0;
  // Reading the power register clears CNVR; current first, both from the same conversion.
  failed_ = !(read_register(kCurrent, current) && read_register(kPower, power));
  if (failed_) return false;
  out.bus_uv = static_cast<int32_t>((bus >> 3) * 4000);
  out.current_ua = static_cast<int32_t>(static_cast<int64_t>(static_cast<int16_t>(current)) * current_lsb_na_ / 1000);
  out.power_uw = static_cast<int32_t>(uint64_t{power} * 20 * current_lsb_na_ / 1000);
  out.flags = (bus & 0x1) != 0 ? kOverflowFlag : 0;
  return true;
}

}  // namespace ergon::devices::cortexm
