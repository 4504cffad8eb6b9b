// The SAMD21G18A's HAL on the Arduino MKR1000 (register offsets from the SAM D21 datasheet,
// DS40001882): the CPU on the 8 MHz internal oscillator, SERCOM5 as a UART on the board's
// Serial1 pins (TX PB22 = pin 14, RX PB23 = pin 13; 115200 8N1; received bytes queued by the
// interrupt) for a USB-serial adapter, SysTick counting CPU cycles (the M0+ has no DWT)
// extended to 64 bits by its interrupt, SERCOM0 as an I2C master for the INA219 (SDA PA08 =
// pin 11, SCL PA09 = pin 12, 100 kHz), SERCOM1 as the SPI master of an SD card (MKR SD
// Proto Shield: MOSI PA16 = pin 8, SCK PA17 = pin 9, MISO PA19 = pin 10, CS PA07 = pin 4) as
// paging storage; without a card, page-outs are refused with that reason.

#include <cstddef>
#include <cstdint>

#include "devices/cortexm/firmware.h"
#include "devices/cortexm/sd_card.h"
#include "devices/cortexm/targets/common/mmio.h"

namespace ergon::devices::cortexm {
namespace {

using mmio::r16;
using mmio::r32;
using mmio::r8;

constexpr uintptr_t kPm = 0x40000400, kSysctrl = 0x40000800, kGclk = 0x40000C00, kPort = 0x41004400;
constexpr uintptr_t kSercom0 = 0x42000800, kSercom1 = 0x42000C00, kSercom5 = 0x42001C00;
constexpr uint32_t kCsPin = 7;  // PA07
constexpr uint32_t kCpuHz = 8'000'000;
constexpr uint32_t kSercom5Irq = 14;

mmio::RingBuffer<512> g_rx;
volatile uint32_t g_systick_wraps = 0;

void gclk_wait() {
  while ((r8(kGclk + 0x01) & 0x80) != 0) {  // STATUS.SYNCBUSY
  }
}

/// Routes generic clock 0 (the CPU's) to peripheral channel `id`.
void clock_peripheral(uint16_t id) {
  r16(kGclk + 0x02) = static_cast<uint16_t>(id | (0U << 8) | (1U << 14));  // CLKCTRL: ID, GEN0, CLKEN
  gclk_wait();
}

/// Pin `pin` of port group `group` (0 A, 1 B) to peripheral function `function` (0 = A).
void pin_function(uint32_t group, uint32_t pin, uint32_t function) {
  const uintptr_t g = kPort + 0x80 * group;
  r8(g + 0x40 + pin) = 1;  // PINCFG.PMUXEN
  volatile uint8_t& pmux = r8(g + 0x30 + pin / 2);
  pmux = static_cast<uint8_t>(pin % 2 == 0 ? (pmux & 0xF0) | function : (pmux & 0x0F) | (function << 4));
}

class Uart final : public ByteLink {
 public:
  void init() {
    r32(kPm + 0x20) |= 1U << 7;  // APBCMASK: SERCOM5
    clock_peripheral(0x19);      // GCLK_SERCOM5_CORE
    pin_function(1, 22, 3);      // PB22: SERCOM5 PAD2 (function D)
    pin_function(1, 23, 3);      // PB23: SERCOM5 PAD3
    // CTRLA: internal clock USART (MODE 1), RXPO PAD3, TXPO PAD2, LSB first.
    r32(kSercom5 + 0x00) = (1U << 2) | (3U << 20) | (1U << 16) | (1U << 30);
    r32(kSercom5 + 0x04) = (1U << 16) | (1U << 17);  // CTRLB: RXEN, TXEN
    while (r32(kSercom5 + 0x1C) != 0) {
    }
    // Arithmetic baud: 65536 x (1 - 16 x 115200 / 8 MHz).
    r16(kSercom5 + 0x0C) = static_cast<uint16_t>(65536ULL - 65536ULL * 16 * 115200 / kCpuHz);
    r8(kSercom5 + 0x16) = 1U << 2;  // INTENSET: RXC
    mmio::enable_irq(kSercom5Irq);
    r32(kSercom5 + 0x00) |= 1U << 1;  // ENABLE
    while (r32(kSercom5 + 0x1C) != 0) {
    }
  }
  std::size_t read(uint8_t* dst, std::size_t capacity) override {
    std::size_t n = 0;
    while (n < capacity && g_rx.pop(dst[n])) ++n;
    return n;
  }
  bool write(const uint8_t* src, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      while ((r8(kSercom5 + 0x18) & 1U) == 0) {  // INTFLAG.DRE
      }
      r16(kSercom5 + 0x28) = src[i];
    }
    return true;
  }
};

class SysTickClock final : public TickClock {
 public:
  void init() {
    r32(0xE000E014) = 0x00FFFFFF;  // SYST_RVR: the full 24 bits
    r32(0xE000E018) = 0;           // SYST_CVR
    r32(0xE000E010) = 7;           // SYST_CSR: CPU clock, interrupt, enable
  }
  uint64_t now_ticks() override {
    // SysTick counts down; read the wraps around it until they agree.
    uint32_t wraps = 0, value = 0;
    do {
      wraps = g_systick_wraps;
      value = r32(0xE000E018) & 0x00FFFFFF;
    } while (wraps != g_systick_wraps);
    return (uint64_t{wraps} << 24) + (0x00FFFFFF - value);
  }
  [[nodiscard]] uint64_t tick_hz() const override { return kCpuHz; }
};

class I2c final : public I2cMaster {
 public:
  void init() {
    r32(kPm + 0x20) |= 1U << 2;  // APBCMASK: SERCOM0
    clock_peripheral(0x14);      // GCLK_SERCOM0_CORE
    pin_function(0, 8, 2);       // PA08: SERCOM0 PAD0 = SDA (function C)
    pin_function(0, 9, 2);       // PA09: SERCOM0 PAD1 = SCL
    r32(kSercom0 + 0x00) = 5U << 2;  // CTRLA: I2C master
    r32(kSercom0 + 0x04) = 1U << 8;  // CTRLB: smart mode
    r32(kSercom0 + 0x0C) = kCpuHz / (2 * 100'000) - 5;  // BAUD: 100 kHz
    r32(kSercom0 + 0x00) |= 1U << 1;                    // ENABLE
    while (r32(kSercom0 + 0x1C) != 0) {
    }
    r16(kSercom0 + 0x1A) = 1U << 4;  // STATUS.BUSSTATE: idle
    while (r32(kSercom0 + 0x1C) != 0) {
    }
  }
  bool transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx, std::size_t rx_n) override {
    bool ok = true;
    if (tx_n > 0) {
      ok = start(static_cast<uint8_t>(address << 1), 0);  // MB when the address is sent
      for (std::size_t i = 0; ok && i < tx_n; ++i) {
        r8(kSercom0 + 0x28) = tx[i];
        ok = wait(0) && (r16(kSercom0 + 0x1A) & (1U << 2)) == 0;  // MB, no RXNACK
      }
    }
    if (ok && rx_n > 0) {
      ok = start(static_cast<uint8_t>(address << 1 | 1), 1);  // SB after the first byte
      for (std::size_t i = 0; ok && i < rx_n; ++i) {
        const bool last = i + 1 == rx_n;
        // Smart mode: reading DATA acknowledges; the last byte is NACKed before it is read.
        if (last) r32(kSercom0 + 0x04) |= 1U << 18;  // CTRLB.ACKACT: NACK
        rx[i] = r8(kSercom0 + 0x28);
        if (!last) ok = wait(1);
      }
    }
    r32(kSercom0 + 0x04) = (r32(kSercom0 + 0x04) & ~(3U << 16)) | (3U << 16);  // CMD 3: stop
    while (r32(kSercom0 + 0x1C) != 0) {
    }
    r32(kSercom0 + 0x04) &= ~(1U << 18);  // ACK again
    return ok;
  }

 private:
  static bool wait(uint32_t flag) {
    for (uint32_t spin = 0; spin < 200'000; ++spin)
      if ((r8(kSercom0 + 0x18) & (1U << flag)) != 0) return true;
    return false;
  }
  static bool start(uint8_t addr, uint32_t flag) {
    r32(kSercom0 + 0x24) = addr;  // ADDR: start (or repeated start) and the address
    return wait(flag) && (r16(kSercom0 + 0x1A) & (1U << 2)) == 0;  // no RXNACK
  }
};

class Spi final : public SpiBus {
 public:
  void init() {
    r32(kPm + 0x20) |= 1U << 3;  // APBCMASK: SERCOM1
    clock_peripheral(0x15);      // GCLK_SERCOM1_CORE
    pin_function(0, 16, 2);      // PA16: SERCOM1 PAD0 = MOSI (function C)
    pin_function(0, 17, 2);      // PA17: SERCOM1 PAD1 = SCK
    pin_function(0, 19, 2);      // PA19: SERCOM1 PAD3 = MISO
    r32(kPort + 0x08) = 1U << kCsPin;  // DIRSET: CS output
    r32(kPort + 0x18) = 1U << kCsPin;  // OUTSET: deselected
    r32(kSercom1 + 0x00) = (3U << 2) | (3U << 20);  // CTRLA: SPI master, DIPO PAD3, DOPO 0
    r32(kSercom1 + 0x04) = 1U << 17;                 // CTRLB: RXEN
    while (r32(kSercom1 + 0x1C) != 0) {
    }
    set_clock_hz(400'000);
  }
  void select(bool selected) override { r32(kPort + (selected ? 0x14 : 0x18)) = 1U << kCsPin; }
  uint8_t transfer(uint8_t out) override {
    while ((r8(kSercom1 + 0x18) & 1U) == 0) {  // DRE
    }
    r32(kSercom1 + 0x28) = out;
    while ((r8(kSercom1 + 0x18) & (1U << 2)) == 0) {  // RXC
    }
    return static_cast<uint8_t>(r32(kSercom1 + 0x28));
  }
  void set_clock_hz(uint32_t hz) override {
    // BAUD = f / (2 x baud) - 1, rounded up so the clock stays at or below `hz`.
    const uint32_t baud = (kCpuHz + 2 * hz - 1) / (2 * hz) - 1;
    r32(kSercom1 + 0x00) &= ~(1U << 1);  // disable to change BAUD
    while (r32(kSercom1 + 0x1C) != 0) {
    }
    r8(kSercom1 + 0x0C) = static_cast<uint8_t>(baud > 255 ? 255 : baud);
    r32(kSercom1 + 0x00) |= 1U << 1;
    while (r32(kSercom1 + 0x1C) != 0) {
    }
  }
};

Uart g_uart;
SysTickClock g_clock;
I2c g_i2c;
Spi g_spi;
alignas(8) uint8_t g_arena[16 * 1024];  // what RAM leaves after the firmware and 4 KiB of stack

}  // namespace
}  // namespace ergon::devices::cortexm

extern "C" void SysTick_Handler() { ergon::devices::cortexm::g_systick_wraps = ergon::devices::cortexm::g_systick_wraps + 1; }

extern "C" void SERCOM5_Handler() {
  using ergon::devices::cortexm::mmio::r16;
  using ergon::devices::cortexm::mmio::r8;
  while ((r8(0x42001C00 + 0x18) & (1U << 2)) != 0)  // INTFLAG.RXC
    ergon::devices::cortexm::g_rx.push(static_cast<uint8_t>(r16(0x42001C00 + 0x28)));
}

namespace {
using Handler = void (*)();
extern "C" void Default_Handler();
// External interrupts 0..27: only SERCOM5 (14) is used.
__attribute__((section(".vectors.chip"), used)) const Handler kChipVectors[28] = {
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, SERCOM5_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler};
}  // namespace

extern "C" void firmware_main() {
  using namespace ergon::devices::cortexm;
  // OSC8M undivided: the CPU and every peripheral at 8 MHz (reset leaves it at 1 MHz).
  r32(kSysctrl + 0x20) &= ~(3U << 8);  // OSC8M.PRESC = 1
  g_clock.init();
  g_uart.init();
  g_i2c.init();
  g_spi.init();
  static SdCard card(g_spi, g_clock);
  BlockDevice* storage = card.init() ? &card : nullptr;
  static const BoardInfo board{.kind = ergon::devices::protocol::BoardKind::kMkr1000,
                               .name = "mkr1000",
                               .firmware_version = 0x000200,
                               .ram_bytes = 32 * 1024,
                               .rail_name = "VIN",
                               .power_mode = "8MHz"};
  static const Ina219Config ina{.address = 0x40, .shunt_milliohm = 1000, .max_current_ma = 327};
  static Firmware firmware(board, Hal{.link = g_uart, .clock = g_clock, .i2c = &g_i2c, .storage = storage},
                           &ina, g_arena, sizeof g_arena);
  firmware.start();
  for (;;) firmware.poll();
}
