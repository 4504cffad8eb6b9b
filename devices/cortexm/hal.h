#pragma once

// The hardware the Cortex-M firmware needs, as small interfaces: a byte link to the host, a
// tick clock, an I2C master for the INA219, and a block device for paging. Each target
// (targets/nrf52840, targets/samd21) implements them on registers, as does targets/mps2_an386
// (the board QEMU emulates, with a modelled INA219 and a RAM disk); the host build implements
// them on a pseudo-terminal, a steady clock, a simulated INA219 and a file, so CI runs the
// firmware's own code. Freestanding: no heap, no exceptions, no RTTI.

#include <cstddef>
#include <cstdint>

#include "devices/protocol/messages.h"

namespace ergon::devices::cortexm {

/// Bytes to and from the host: a UART or USB-CDC.
class ByteLink {
 public:
  /// Whatever arrived since the last call (0: nothing); never blocks.
  virtual std::size_t read(uint8_t* dst, std::size_t capacity) = 0;
  /// Queues all of `src`, waiting for room if it must; false when the link is gone.
  virtual bool write(const uint8_t* src, std::size_t n) = 0;

 protected:
  ~ByteLink() = default;
};

/// A monotonic tick counter: DWT CYCCNT (Cortex-M4) or a timer (Cortex-M0+ has no DWT),
/// extended to 64 bits.
class TickClock {
 public:
  virtual uint64_t now_ticks() = 0;
  [[nodiscard]] virtual uint64_t tick_hz() const = 0;

 protected:
  ~TickClock() = default;
};

/// An I2C master (7-bit addresses).
class I2cMaster {
 public:
  /// Writes `tx` (if any), then with a repeated start reads `rx_n` bytes (if any); false on a
  /// NACK or bus error.
  virtual bool transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx,
                        std::size_t rx_n) = 0;

 protected:
  ~I2cMaster() = default;
};

/// An SPI master with one device on it (mode 0, MSB first).
class SpiBus {
 public:
  /// Chip select: true asserts it (drives CS low).
  virtual void select(bool selected) = 0;
  /// Clocks `out` out and returns the byte clocked in.
  virtual uint8_t transfer(uint8_t out) = 0;
  /// The fastest clock at or below `hz` the chip can make.
  virtual void set_clock_hz(uint32_t hz) = 0;

 protected:
  ~SpiBus() = default;
};

/// Storage for paged activations: an SD card (sd_card.h), or a file on the host.
class BlockDevice {
 public:
  [[nodiscard]] virtual uint32_t block_bytes() const = 0;
  [[nodiscard]] virtual uint32_t block_count() const = 0;
  /// Writes (erasing first where the medium needs it) or reads whole blocks; false on error.
  virtual bool write(uint32_t first_block, const uint8_t* src, uint32_t blocks) = 0;
  virtual bool read(uint32_t first_block, uint8_t* dst, uint32_t blocks) = 0;

 protected:
  ~BlockDevice() = default;
};

/// What the firmware says about its board in Hello.
struct BoardInfo {
  protocol::BoardKind kind = protocol::BoardKind::kUnknown;
  const char* name = "";
  uint32_t firmware_version = 0;
  uint32_t ram_bytes = 0;
  const char* rail_name = "VDD";  ///< the supply rail its INA219 measures
  /// The clock it runs at, as a power mode's name ("64MHz"): the firmware's only mode.
  const char* power_mode = "";
};

/// The INA219 on the board's supply lead, if there is one.
struct Ina219Config {
  uint8_t address = 0x40;
  uint32_t shunt_milliohm = 100;
  uint32_t max_current_ma = 1000;  ///< sets the current LSB (max / 32768)
};

struct Hal {
  ByteLink& link;
  TickClock& clock;
  I2cMaster* i2c = nullptr;       ///< null: no power monitor (spans only)
  BlockDevice* storage = nullptr; ///< null: page-outs are refused
};

}  // namespace ergon::devices::cortexm
