#include "devices/cortexm/sd_card.h"

#include <gtest/gtest.h>

#include <vector>

#include "devices/cortexm/host/sim_sd_card.h"

namespace ergon::devices::cortexm {
namespace {

class StepClock final : public TickClock {
 public:
  uint64_t now_ticks() override { return t += 100; }  // 100 us a look
  [[nodiscard]] uint64_t tick_hz() const override { return 1'000'000; }
  uint64_t t = 0;
};

TEST(SdCard, CommandCrcsAreTheOnesCardsCheck) {
  const uint8_t cmd0[5] = {0x40, 0, 0, 0, 0};
  const uint8_t cmd8[5] = {0x48, 0, 0, 0x01, 0xAA};
  EXPECT_EQ(sd_crc7(cmd0, 5), 0x95);  // the two CRCs every SPI-mode init sends
  EXPECT_EQ(sd_crc7(cmd8, 5), 0x87);
}

TEST(SdCard, InitializesACardAndPagesBlocksThroughIt) {
  SimSdCard card(4096);
  StepClock clock;
  SdCard sd(card, clock);
  ASSERT_TRUE(sd.init());
  EXPECT_TRUE(sd.high_capacity());
  EXPECT_EQ(sd.block_count(), 4096U);
  EXPECT_EQ(card.clock_hz(), 8'000'000U) << "full speed once initialized";
  EXPECT_EQ(card.crc_errors(), 0U);
  std::vector<uint8_t> out(3 * 512), in(3 * 512);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(sd.write(100, out.data(), 3));
  EXPECT_EQ(card.blocks_written(), 3U);
  ASSERT_TRUE(sd.read(100, in.data(), 3));
  EXPECT_EQ(in, out);
  EXPECT_FALSE(sd.read(4095, in.data(), 2)) << "past the end of the card";
  card.reject_writes(true);
  EXPECT_FALSE(sd.write(0, out.data(), 1)) << "a write the card rejects fails";
}

TEST(SdCard, NoCardIsNoStorage) {
  SimSdCard card;
  card.remove();
  StepClock clock;
  SdCard sd(card, clock);
  EXPECT_FALSE(sd.init());
  EXPECT_EQ(sd.block_count(), 0U);
  uint8_t block[512] = {};
  EXPECT_FALSE(sd.write(0, block, 1));
}

}  // namespace
}  // namespace ergon::devices::cortexm
