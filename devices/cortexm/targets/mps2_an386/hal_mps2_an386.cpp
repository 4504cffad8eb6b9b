// The HAL of Arm's MPS2 board with the AN386 FPGA image (Cortex-M4 with FPU, 25 MHz), as
// Debian's qemu-system-arm emulates it (`-M mps2-an386`), so that CI runs the firmware image
// itself, its vector table, reset handler and linker script on an emulated CPU. Register
// offsets from the Cortex-M System Design Kit TRM (ARM DDI 0479C) and AN386; addresses from
// the AN386 memory map (QEMU's hw/arm/mps2.c follows it):
//   - UART0, a CMSDK APB UART at 0x40004000 (115200 8N1, BAUDDIV 217 from the 25 MHz PCLK),
//     received bytes queued by its RX interrupt (IRQ 0), sent by polling TXFULL;
//   - the tick clock: CMSDK APB Timer0 at 0x40000000, a 32-bit down-counter at PCLK (25 MHz)
//     from 0xFFFFFFFF, extended to 64 bits in software (QEMU does not model the DWT: CYCCNT
//     reads 0 there, so the nRF52840's cycle counter cannot be used);
//   - the power monitor: the board has no I2C INA219, so the I2C master talks to an INA219
//     modelled at register level (modelled_ina219.h) at 0x40 behind a 1 ohm shunt, whose
//     supply follows what the firmware does, at the nRF52840 profile's figures (this image
//     declares itself an nRF52840: see BoardInfo below);
//   - paging storage: a RAM disk on the board's 16 MiB PSRAM at 0x21000000 (no SD card slot
//     is emulated), 512-byte blocks.

#include <cstddef>
#include <cstdint>

#include "devices/cortexm/firmware.h"
#include "devices/cortexm/targets/common/mmio.h"
#include "devices/cortexm/targets/mps2_an386/modelled_ina219.h"

extern "C" {
extern uint8_t _ramdisk_start[], _ramdisk_end[];  // the PSRAM region, from the linker script
}

namespace ergon::devices::cortexm {
namespace {

using mmio::r32;

constexpr uintptr_t kTimer0 = 0x40000000, kUart0 = 0x40004000;
constexpr uint32_t kPclkHz = 25'000'000;
constexpr uint32_t kUart0RxIrq = 0;
// CMSDK APB UART registers and bits.
constexpr uintptr_t kData = 0x00, kState = 0x04, kCtrl = 0x08, kIntStatus = 0x0C, kBaudDiv = 0x10;
constexpr uint32_t kTxFull = 1U << 0, kRxFull = 1U << 1;
constexpr uint32_t kTxEn = 1U << 0, kRxEn = 1U << 1, kRxIntEn = 1U << 3;
constexpr uint32_t kRxInt = 1U << 1;

mmio::RingBuffer<1024> g_rx;

class Uart final : public ByteLink {
 public:
  void init() {
    r32(kUart0 + kBaudDiv) = kPclkHz / 115'200;  // 217: 115200 baud
    r32(kUart0 + kIntStatus) = 0xF;              // clear anything pending
    r32(kUart0 + kCtrl) = kTxEn | kRxEn | kRxIntEn;
    mmio::enable_irq(kUart0RxIrq);
  }
  std::size_t read(uint8_t* dst, std::size_t capacity) override {
    std::size_t n = 0;
    while (n < capacity && g_rx.pop(dst[n])) ++n;
    return n;
  }
  bool write(const uint8_t* src, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      while ((r32(kUart0 + kState) & kTxFull) != 0) {
      }
      r32(kUart0 + kData) = src[i];
    }
    return true;
  }
};

class TimerClock final : public TickClock {
 public:
  void init() {
    r32(kTimer0 + 0x00) = 0;           // CTRL: stopped
    r32(kTimer0 + 0x08) = 0xFFFFFFFF;  // RELOAD: the full 32 bits
    r32(kTimer0 + 0x04) = 0xFFFFFFFF;  // VALUE
    r32(kTimer0 + 0x00) = 1;           // CTRL: enable, PCLK, no interrupt
  }
  uint64_t now_ticks() override {
    // Counts down and wraps every 172 s; the main loop looks far more often.
    const uint32_t value = r32(kTimer0 + 0x04);
    ticks_ += static_cast<uint32_t>(last_ - value);
    last_ = value;
    return ticks_;
  }
  [[nodiscard]] uint64_t tick_hz() const override { return kPclkHz; }

 private:
  uint32_t last_ = 0xFFFFFFFF;
  uint64_t ticks_ = 0;
};

/// The I2C bus with the modelled INA219 at 0x40; other addresses are not acknowledged.
class ModelledI2c final : public I2cMaster {
 public:
  void attach(uint8_t address, ModelledIna219& chip) { address_ = address, chip_ = &chip; }
  bool transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx, std::size_t rx_n) override {
    if (chip_ == nullptr || address != address_) return false;
    chip_->on_write(tx, tx_n);
    if (rx_n > 0) chip_->on_read(rx, rx_n);
    return true;
  }

 private:
  uint8_t address_ = 0;
  ModelledIna219* chip_ = nullptr;
};

/// Blocks of the board's PSRAM.
class RamDisk final : public BlockDevice {
 public:
  [[nodiscard]] uint32_t block_bytes() const override { return 512; }
  [[nodiscard]] uint32_t block_count() const override {
    return static_cast<uint32_t>((_ramdisk_end - _ramdisk_start) / 512);
  }
  bool write(uint32_t first_block, const uint8_t* src, uint32_t blocks) override {
    if (uint64_t{first_block} + blocks > block_count()) return false;
    copy(_ramdisk_start + std::size_t{first_block} * 512, src, std::size_t{blocks} * 512);
    return true;
  }
  bool read(uint32_t first_block, uint8_t* dst, uint32_t blocks) override {
    if (uint64_t{first_block} + blocks > block_count()) return false;
    copy(dst, _ramdisk_start + std::size_t{first_block} * 512, std::size_t{blocks} * 512);
    return true;
  }

 private:
  static void copy(uint8_t* dst, const uint8_t* src, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
};

// The supply the modelled INA219 measures: the nRF52840 profile's (devices/board_profile.cpp:
// 3.3 V, 0.6 mA idle, 3.3 mA more computing, 100 mA more paging to its SD card), through
// devices::supply_reading's 50 mOhm source, with its 10 uV of shunt noise.
constexpr uint32_t kBusUv = 3'300'000, kSourceMohm = 50, kShuntNoiseNv = 10'000;
constexpr uint64_t kIdleUw = 3'300 * 6 / 10, kComputeUw = 3'300 * 33 / 10, kStorageUw = 330'000;
constexpr ModelledSupply kIdle = supply_at(kIdleUw, kBusUv, kSourceMohm);
constexpr ModelledSupply kComputing = supply_at(kIdleUw + kComputeUw, kBusUv, kSourceMohm);
constexpr ModelledSupply kPaging = supply_at(kIdleUw + kStorageUw, kBusUv, kSourceMohm);
static_assert(kIdle.current_na > 599'000 && kIdle.current_na < 601'000);

ModelledSupply supply_now(void* firmware) {
  if (firmware == nullptr) return kIdle;
  switch (static_cast<const Firmware*>(firmware)->activity()) {
    case Firmware::Activity::kComputing: return kComputing;
    case Firmware::Activity::kPaging: return kPaging;
    case Firmware::Activity::kIdle: break;
  }
  return kIdle;
}

Uart g_uart;
TimerClock g_clock;
ModelledI2c g_i2c;
RamDisk g_ramdisk;
alignas(8) uint8_t g_arena[224 * 1024];  // the nRF52840's arena: this image stands in for it

}  // namespace
}  // namespace ergon::devices::cortexm

extern "C" void UART0RX_IRQHandler() {
  using namespace ergon::devices::cortexm;
  // Clear the interrupt first, then drain: a byte arriving after the last look raises it again.
  mmio::r32(kUart0 + kIntStatus) = kRxInt;
  while ((mmio::r32(kUart0 + kState) & kRxFull) != 0) g_rx.push(static_cast<uint8_t>(mmio::r32(kUart0 + kData)));
}

namespace {
using Handler = void (*)();
extern "C" void Default_Handler();
// External interrupts 0..31 of AN386: only UART0 RX (0) is used.
__attribute__((section(".vectors.chip"), used)) const Handler kChipVectors[32] = {
    UART0RX_IRQHandler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler,    Default_Handler};
}  // namespace

extern "C" void firmware_main() {
  using namespace ergon::devices::cortexm;
  g_clock.init();
  g_uart.init();
  // An nRF52840 to the host (kind, RAM, arena and plan size), so `ergon record` sends it the
  // nRF52840's profile plan; its name and clock say what it really is.
  static const BoardInfo board{.kind = ergon::devices::protocol::BoardKind::kNrf52840,
                               .name = "mps2-an386",
                               .firmware_version = 0x000200,
                               .ram_bytes = 256 * 1024,
                               .rail_name = "VDD",
                               .power_mode = "25MHz"};
  // The nRF52840 DK's INA219 settings: 1 ohm shunt, 10 uA steps (up to 327 mA).
  static const Ina219Config ina{.address = 0x40, .shunt_milliohm = 1000, .max_current_ma = 327};
  static Firmware firmware(board, Hal{.link = g_uart, .clock = g_clock, .i2c = &g_i2c, .storage = &g_ramdisk},
                           &ina, g_arena, sizeof g_arena);
  // The modelled INA219 at 0x40 behind its 1 ohm shunt; its supply follows the firmware.
  static ModelledIna219 chip(g_clock, 1000, kShuntNoiseNv, supply_now, &firmware);
  g_i2c.attach(0x40, chip);
  firmware.start();
  for (;;) firmware.poll();
}
