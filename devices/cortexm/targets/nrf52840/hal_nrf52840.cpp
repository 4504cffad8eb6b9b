// The nRF52840's HAL (register offsets from the nRF52840 Product Specification v1.7), for
// the nRF52840 DK: UART0 on its J-Link virtual COM port (TX P0.06, RX P0.08, 115200 8N1,
// received bytes queued by the interrupt), the cycle counter (DWT CYCCNT, 64 MHz, extended
// to 64 bits), TWIM0 for the INA219 (SDA P0.26, SCL P0.27, 400 kHz), SPIM1 for an SD card
// on the Arduino header's SPI pins (SCK P1.15, MOSI P1.13, MISO P1.14, CS P1.12) as paging
// storage; without a card, page-outs are refused with that reason.

#include <cstddef>
#include <cstdint>

#include "devices/cortexm/firmware.h"
#include "devices/cortexm/sd_card.h"
#include "devices/cortexm/targets/common/mmio.h"

namespace ergon::devices::cortexm {
namespace {

using mmio::r32;

constexpr uintptr_t kClock = 0x40000000, kUart0 = 0x40002000, kTwim0 = 0x40003000, kSpim1 = 0x40004000;
constexpr uintptr_t kP0 = 0x50000000, kP1 = 0x50000300;
constexpr uint32_t kSckPin = 15, kMosiPin = 13, kMisoPin = 14, kCsPin = 12;  // on port 1
constexpr uint32_t kTxPin = 6, kRxPin = 8, kSdaPin = 26, kSclPin = 27;
constexpr uint32_t kUart0Irq = 2;

mmio::RingBuffer<1024> g_rx;

class Uart final : public ByteLink {
 public:
  void init() {
    r32(kP0 + 0x508) = 1U << kTxPin;  // OUTSET: idle high
    r32(kP0 + 0x700 + 4 * kTxPin) = 1;  // output
    r32(kUart0 + 0x50C) = kTxPin;      // PSEL.TXD
    r32(kUart0 + 0x514) = kRxPin;      // PSEL.RXD
    r32(kUart0 + 0x524) = 0x01D7E000;  // BAUDRATE 115200
    r32(kUart0 + 0x500) = 4;           // ENABLE: UART
    r32(kUart0 + 0x304) = 1U << 2;     // INTENSET: RXDRDY
    mmio::enable_irq(kUart0Irq);
    r32(kUart0 + 0x000) = 1;  // STARTRX
    r32(kUart0 + 0x008) = 1;  // STARTTX
  }
  std::size_t read(uint8_t* dst, std::size_t capacity) override {
    std::size_t n = 0;
    while (n < capacity && g_rx.pop(dst[n])) ++n;
    return n;
  }
  bool write(const uint8_t* src, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      r32(kUart0 + 0x11C) = 0;  // EVENTS_TXDRDY
      r32(kUart0 + 0x51C) = src[i];
      while (r32(kUart0 + 0x11C) == 0) {
      }
    }
    return true;
  }
};

class CycleClock final : public TickClock {
 public:
  void init() {
    r32(0xE000EDFC) |= 1U << 24;  // DEMCR.TRCENA
    r32(0xE0001004) = 0;          // DWT CYCCNT
    r32(0xE0001000) |= 1;         // DWT CTRL.CYCCNTENA
  }
  uint64_t now_ticks() override {
    const uint32_t now = r32(0xE0001004);
    if (now < last_) high_ += 1ULL << 32;  // wraps every 67 s; the main loop looks far more often
    last_ = now;
    return high_ | now;
  }
  [[nodiscard]] uint64_t tick_hz() const override { return 64'000'000; }

 private:
  uint32_t last_ = 0;
  uint64_t high_ = 0;
};

class Twim final : public I2cMaster {
 public:
  void init() {
    constexpr uint32_t kPinCnf = (3U << 2) | (6U << 8);  // input, pull-up, S0D1 drive
    r32(kP0 + 0x700 + 4 * kSdaPin) = kPinCnf;
    r32(kP0 + 0x700 + 4 * kSclPin) = kPinCnf;
    r32(kTwim0 + 0x508) = kSclPin;     // PSEL.SCL
    r32(kTwim0 + 0x50C) = kSdaPin;     // PSEL.SDA
    r32(kTwim0 + 0x524) = 0x06400000;  // FREQUENCY 400 kHz
    r32(kTwim0 + 0x500) = 6;           // ENABLE: TWIM
  }
  bool transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx, std::size_t rx_n) override {
    // EasyDMA reads RAM only: the bytes to send are copied there first.
    for (std::size_t i = 0; i < tx_n && i < sizeof tx_buf_; ++i) tx_buf_[i] = tx[i];
    r32(kTwim0 + 0x588) = address;                               // ADDRESS
    r32(kTwim0 + 0x544) = reinterpret_cast<uintptr_t>(tx_buf_);  // TXD.PTR
    r32(kTwim0 + 0x548) = static_cast<uint32_t>(tx_n);           // TXD.MAXCNT
    r32(kTwim0 + 0x534) = reinterpret_cast<uintptr_t>(rx);       // RXD.PTR
    r32(kTwim0 + 0x538) = static_cast<uint32_t>(rx_n);           // RXD.MAXCNT
    r32(kTwim0 + 0x104) = 0;                                     // EVENTS_STOPPED
    r32(kTwim0 + 0x124) = 0;                                     // EVENTS_ERROR
    r32(kTwim0 + 0x4C4) = 7;                                     // ERRORSRC (write 1s to clear)
    __asm volatile("" ::: "memory");  // the bytes in RAM before EasyDMA moves them
    if (tx_n > 0) {
      r32(kTwim0 + 0x200) = rx_n > 0 ? (1U << 7) | (1U << 12) : (1U << 9);  // LASTTX_STARTRX+LASTRX_STOP : LASTTX_STOP
      r32(kTwim0 + 0x008) = 1;                                               // STARTTX
    } else {
      r32(kTwim0 + 0x200) = 1U << 12;  // LASTRX_STOP
      r32(kTwim0 + 0x000) = 1;         // STARTRX
    }
    for (uint32_t spin = 0; r32(kTwim0 + 0x104) == 0; ++spin) {
      if (r32(kTwim0 + 0x124) != 0 || spin > 2'000'000) {
        r32(kTwim0 + 0x014) = 1;  // STOP
        while (r32(kTwim0 + 0x104) == 0 && spin++ < 4'000'000) {
        }
        return false;
      }
    }
    __asm volatile("" ::: "memory");  // what EasyDMA received
    return r32(kTwim0 + 0x4C4) == 0;
  }

 private:
  uint8_t tx_buf_[8] = {};
};

class Spim final : public SpiBus {
 public:
  void init() {
    r32(kP1 + 0x508) = 1U << kCsPin;             // OUTSET: deselected
    r32(kP1 + 0x700 + 4 * kCsPin) = 1;           // output
    r32(kP1 + 0x700 + 4 * kSckPin) = 1;          // output
    r32(kP1 + 0x700 + 4 * kMosiPin) = 1;         // output
    r32(kP1 + 0x700 + 4 * kMisoPin) = 0;         // input, connected
    r32(kSpim1 + 0x508) = kSckPin | (1U << 5);   // PSEL.SCK (port 1)
    r32(kSpim1 + 0x50C) = kMosiPin | (1U << 5);  // PSEL.MOSI
    r32(kSpim1 + 0x510) = kMisoPin | (1U << 5);  // PSEL.MISO
    r32(kSpim1 + 0x554) = 0;                     // CONFIG: mode 0, MSB first
    r32(kSpim1 + 0x5C0) = 0xFF;                  // ORC
    r32(kSpim1 + 0x500) = 7;                     // ENABLE: SPIM
  }
  void select(bool selected) override { r32(kP1 + (selected ? 0x50C : 0x508)) = 1U << kCsPin; }
  uint8_t transfer(uint8_t out) override {
    tx_ = out;
    r32(kSpim1 + 0x544) = reinterpret_cast<uintptr_t>(&tx_);  // TXD.PTR
    r32(kSpim1 + 0x548) = 1;
    r32(kSpim1 + 0x534) = reinterpret_cast<uintptr_t>(&rx_);  // RXD.PTR
    r32(kSpim1 + 0x538) = 1;
    r32(kSpim1 + 0x118) = 0;            // EVENTS_END
    __asm volatile("" ::: "memory");  // tx_ in RAM before EasyDMA reads it
    r32(kSpim1 + 0x010) = 1;            // TASKS_START
    while (r32(kSpim1 + 0x118) == 0) {
    }
    __asm volatile("" ::: "memory");  // rx_ as EasyDMA wrote it
    return rx_;
  }
  void set_clock_hz(uint32_t hz) override {
    // FREQUENCY: 125 kHz << n for n = 0..6 (8 MHz).
    uint32_t n = 0;
    while (n < 6 && (125'000U << (n + 1)) <= hz) ++n;
    r32(kSpim1 + 0x524) = 0x02000000U << n;
  }

 private:
  uint8_t tx_ = 0xFF, rx_ = 0xFF;
};

Uart g_uart;
CycleClock g_clock;
Twim g_twim;
Spim g_spim;
alignas(8) uint8_t g_arena[224 * 1024];  // what RAM leaves after the firmware and 4+ KiB of stack

}  // namespace
}  // namespace ergon::devices::cortexm

extern "C" void UARTE0_UART0_IRQHandler() {
  using ergon::devices::cortexm::mmio::r32;
  while (r32(0x40002000 + 0x108) != 0) {  // EVENTS_RXDRDY
    r32(0x40002000 + 0x108) = 0;
    ergon::devices::cortexm::g_rx.push(static_cast<uint8_t>(r32(0x40002000 + 0x518)));  // RXD
  }
}

namespace {
using Handler = void (*)();
extern "C" void Default_Handler();
// External interrupts 0..47: only UART0 (2) is used.
__attribute__((section(".vectors.chip"), used)) const Handler kChipVectors[48] = {
    Default_Handler, Default_Handler, UARTE0_UART0_IRQHandler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler};
}  // namespace

extern "C" void firmware_main() {
  using namespace ergon::devices::cortexm;
  // The 64 MHz crystal: the UART's baud rate and the cycle counter both run from it.
  r32(kClock + 0x100) = 0;  // EVENTS_HFCLKSTARTED
  r32(kClock + 0x000) = 1;  // TASKS_HFCLKSTART
  while (r32(kClock + 0x100) == 0) {
  }
  g_clock.init();
  g_uart.init();
  g_twim.init();
  g_spim.init();
  static SdCard card(g_spim, g_clock);
  BlockDevice* storage = card.init() ? &card : nullptr;
  static const BoardInfo board{.kind = ergon::devices::protocol::BoardKind::kNrf52840,
                               .name = "nrf52840",
                               .firmware_version = 0x000200,
                               .ram_bytes = 256 * 1024,
                               .rail_name = "VDD",
                               .power_mode = "64MHz"};
  // The INA219 on the board's supply lead: 1 ohm shunt, 10 uA steps (up to 327 mA).
  static const Ina219Config ina{.address = 0x40, .shunt_milliohm = 1000, .max_current_ma = 327};
  static Firmware firmware(board, Hal{.link = g_uart, .clock = g_clock, .i2c = &g_twim, .storage = storage},
                           &ina, g_arena, sizeof g_arena);
  firmware.start();
  for (;;) firmware.poll();
}
