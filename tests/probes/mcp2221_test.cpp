#include "probes/mcp2221.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/support/fake_clock.h"
#include "common/error.h"
#include "probes/ina2xx.h"
#include "probes/sim_ina2xx.h"

namespace ergon::probes {
namespace {

using ergon::testing::FakeClock;

/// An MCP2221A as its datasheet describes it, at the HID report level, with simulated chips
/// behind it: what the bridge driver is tested against.
class FakeMcp2221 final : public HidTransport {
 public:
  explicit FakeMcp2221(const Clock& clock) : clock_(clock) {}
  void attach(uint8_t address, SimIna2xx& chip) { chips_[address] = &chip; }

  void send(const Report& r) override {
    answer_ = {};
    answer_[0] = r[0];
    const std::size_t length = r[1] | r[2] << 8;
    const auto address = static_cast<uint8_t>(r[3] >> 1);
    switch (r[0]) {
      case 0x10:  // status / set parameters
        if (r[2] == 0x10) state_ = 0;  // cancel
        answer_[3] = r[3] == 0x20 ? 0x20 : 0;
        answer_[8] = state_;
        ++status_polls_;
        break;
      case 0x90:
      case 0x94: {  // write (without stop)
        const auto chip = chips_.find(address);
        if (chip == chips_.end()) {
          state_ = 0x25;  // address not acknowledged
          break;
        }
        chip->second->on_write(std::span<const uint8_t>(r.data() + 4, length), clock_.now_ns());
        state_ = 0;
        break;
      }
      case 0x91:
      case 0x93: {  // read (repeated start)
        const auto chip = chips_.find(address);
        pending_.clear();
        if (chip == chips_.end()) {
          state_ = 0x25;
          break;
        }
        pending_.resize(length);
        chip->second->on_read(pending_, clock_.now_ns());
        state_ = 0;
        break;
      }
      case 0x40:  // get the data read
        if (state_ == 0x25) {
          answer_[1] = 0x41;
          answer_[2] = 0x25;
          answer_[3] = 127;
        } else {
          answer_[3] = static_cast<uint8_t>(pending_.size());
          std::copy(pending_.begin(), pending_.end(), answer_.begin() + 4);
        }
        break;
      default:
        answer_[0] = 0xFF;
    }
  }
  Report receive() override { return answer_; }
  [[nodiscard]] std::string name() const override { return "fake mcp2221"; }

  int status_polls_ = 0;

 private:
  const Clock& clock_;
  std::map<uint8_t, SimIna2xx*> chips_;
  Report answer_{};
  uint8_t state_ = 0;
  std::vector<uint8_t> pending_;
};

TEST(Mcp2221, AnIna219OnTheBridgeIsConfiguredAndReadThroughHidReports) {
  FakeClock clock;
  SimIna2xx chip(Ina2xxChip::kIna219, 0.1, [](int64_t) { return SupplyState{5.0, 0.42}; });
  auto fake = std::make_unique<FakeMcp2221>(clock);
  fake->attach(0x40, chip);
  Mcp2221Bus bus(std::move(fake));
  Ina2xxConfig c;
  c.shunt_ohm = 0.1;
  c.max_current_a = 3.2;
  Ina2xx ina(bus, c, clock);
  ina.configure();
  const PowerSample s = ina.read_next();
  EXPECT_NEAR(s.current_ua, 420'000, 100);
  EXPECT_NEAR(s.bus_uv, 5'000'000, 4000);
  EXPECT_EQ(s.flags, kSampleOk);
}

TEST(Mcp2221, AnAddressNobodyAnswersIsOneClearErrorAndTheBridgeRecovers) {
  FakeClock clock;
  SimIna2xx chip(Ina2xxChip::kIna226, 0.1, [](int64_t) { return SupplyState{12.0, 0.2}; });
  auto fake = std::make_unique<FakeMcp2221>(clock);
  fake->attach(0x41, chip);
  Mcp2221Bus bus(std::move(fake));
  try {
    read_register(bus, 0x45, 0x00);
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("0x45 on fake mcp2221 failed: no device answered"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_register(bus, 0x41, 0xFE), 0x5449);  // the INA226's manufacturer ID
}

TEST(Mcp2221, OpeningABridgeThatIsNotThereSaysSo) {
  // One past the bridges plugged in (none, on a CI machine) is never there.
  const int absent = static_cast<int>(find_mcp2221().size());
  try {
    open_mcp2221_usb(absent);
    ADD_FAILURE();
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("no MCP2221A") != std::string::npos ||
                what.find("cannot use USB") != std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace ergon::probes
