#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>

#include "common/clock.h"
#include "probes/i2c.h"
#include "probes/ina2xx.h"

namespace ergon::probes {

/// What flows through the shunt at an instant: the truth a simulated chip converts.
struct SupplyState {
  double bus_v = 0;
  double current_a = 0;
};
using SupplySource = std::function<SupplyState(int64_t t_ns)>;

/// An INA219, INA226 or INA260 at the register level: the pointer register, configuration
/// and calibration as written, conversions on the chip's own schedule (continuous from the
/// last configuration write, or one per trigger), each sampling the supply when it completes,
/// quantized and computed with the chip's integer arithmetic (saturation and the overflow
/// flag included), and the conversion-ready flag with its clearing rules. Registers between
/// conversions hold the last result: a driver that reads too slowly loses conversions, as it
/// would on the chip.
class SimIna2xx {
 public:
  SimIna2xx(Ina2xxChip chip, double shunt_ohm, SupplySource source, double shunt_noise_v = 0,
            uint64_t seed = 1);

  void on_write(std::span<const uint8_t> data, int64_t now_ns);
  void on_read(std::span<uint8_t> out, int64_t now_ns);

  [[nodiscard]] Ina2xxChip chip() const { return chip_; }
  /// Conversions completed so far (each one the driver could have read).
  [[nodiscard]] uint64_t conversions() const { return conversions_; }
  /// The truth of the last conversion, for tests.
  [[nodiscard]] const SupplyState& last_truth() const { return last_truth_; }

 private:
  void reset(int64_t now_ns);
  void update(int64_t now_ns);
  void convert(int64_t t_ns);
  uint16_t value(uint8_t reg);

  Ina2xxChip chip_;
  double shunt_ohm_;
  SupplySource source_;
  double shunt_noise_v_;
  std::mt19937_64 rng_;
  uint8_t pointer_ = 0;
  uint16_t config_ = 0;
  uint16_t calibration_ = 0;
  uint16_t shunt_ = 0, bus_ = 0, power_ = 0, current_ = 0;
  bool ready_ = false;
  bool overflow_ = false;
  int64_t start_ns_ = 0;         ///< continuous: conversions complete at start + k x period
  int64_t converted_k_ = 0;      ///< the last conversion index done
  int64_t trigger_done_ns_ = -1;  ///< triggered: when the pending conversion completes
  uint64_t conversions_ = 0;
  SupplyState last_truth_;
};

/// A simulated I2C bus with chips on it. Each transaction takes its time on the wire (9 bits
/// a byte, plus start and stop) at `bus_hz`; `spend` lets a test's clock pass it. Addresses
/// with no chip, and transactions told to fail, are not acknowledged (DeviceError).
class SimI2cBus final : public I2cBus {
 public:
  explicit SimI2cBus(const Clock& clock, double bus_hz = 400e3, std::string name = "sim-i2c");

  void attach(uint8_t address, SimIna2xx& chip) { chips_[address] = &chip; }
  /// The next `n` transactions fail (a glitch on the wire, a chip in reset).
  void fail_next(int n) { fail_next_ = n; }
  /// Called with each transaction's duration on the wire (ns).
  std::function<void(int64_t)> spend;

  void write(uint8_t address, std::span<const uint8_t> data) override;
  void write_read(uint8_t address, std::span<const uint8_t> out, std::span<uint8_t> in) override;
  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] uint64_t transactions() const { return transactions_; }

 private:
  SimIna2xx& chip_at(uint8_t address, std::size_t bytes);

  const Clock& clock_;
  double bus_hz_;
  std::string name_;
  std::map<uint8_t, SimIna2xx*> chips_;
  int fail_next_ = 0;
  uint64_t transactions_ = 0;
};

}  // namespace ergon::probes
