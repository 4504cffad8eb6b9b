#pragma once
// Nordic's Power Profiler Kit II over its USB-CDC serial protocol (docs/boards.md, "Power
// monitors"; the protocol as Nordic's pc-nrfconnect-ppk and IRNAS's ppk2-api-python speak it,
// tests/data/ppk2/README.md): a source meter (it supplies the board at a set voltage) or an
// ampere meter (in series with the board's own supply), 100,000 samples a second, each with
// its measurement range, a rolling counter and the eight digital inputs.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "probes/probe.h"

namespace ergon::probes {

inline constexpr uint16_t kPpk2UsbVendor = 0x1915;
inline constexpr uint16_t kPpk2UsbProduct = 0xC00A;
inline constexpr double kPpk2SampleRateHz = 100'000;

/// Commands (host to device: an opcode and its arguments, no framing).
enum Ppk2Command : uint8_t {
  kPpk2AverageStart = 0x06,
  kPpk2AverageStop = 0x07,
  kPpk2DeviceRunningSet = 0x0C,  ///< 1 byte: the board's power on (1) or off (0)
  kPpk2RegulatorSet = 0x0D,      ///< 2 bytes: millivolts, big-endian
  kPpk2SetPowerMode = 0x11,      ///< 1 byte: 1 ampere meter, 2 source meter
  kPpk2GetMetadata = 0x19,       ///< answered with "Key: value" lines and "END\n"
};
enum class Ppk2Mode : uint8_t { kAmpere = 1, kSource = 2 };

/// The per-range calibration the device reports in its metadata.
struct Ppk2Calibration {
  std::array<double, 5> r{1031.64, 101.65, 10.15, 0.94, 0.043};
  std::array<double, 5> gs{1, 1, 1, 1, 1}, gi{1, 1, 1, 1, 1}, ug{1, 1, 1, 1, 1};
  std::array<double, 5> o{}, s{}, i{};
  int vdd_mv = 3000;
  int mode = 2;  ///< as the device last ran: 1 ampere, 2 source
  int hw = 0;
  bool calibrated = false;
};
/// Parses the metadata text (up to and without "END"); keys it does not know are ignored,
/// numbers it cannot read are InputError naming the key.
Ppk2Calibration parse_ppk2_metadata(std::string_view text);
/// The metadata text a device with `cal` answers, ending "END\n" (the simulator's).
std::string ppk2_metadata_text(const Ppk2Calibration& cal);

/// One 32-bit sample's fields: ADC (14 bits, scaled x4), range (0..4), counter (6 bits),
/// digital inputs (8 bits).
struct Ppk2Sample {
  uint32_t adc = 0;
  uint8_t range = 0;
  uint8_t counter = 0;
  uint8_t logic = 0;
};
Ppk2Sample decode_ppk2_sample(uint32_t word);
/// The current a sample stands for, in amperes, at regulator voltage `vdd_mv`.
double ppk2_current_a(const Ppk2Sample& sample, const Ppk2Calibration& cal, int vdd_mv);
/// The inverse, for a simulator: the word of the lowest range that holds `current_a`.
uint32_t encode_ppk2_sample(double current_a, const Ppk2Calibration& cal, int vdd_mv, uint8_t counter,
                            uint8_t logic);

/// A change of the digital inputs: an op marker where a board toggles a pin around its ops.
struct Ppk2Edge {
  int64_t t_ns = 0;  ///< host clock
  uint8_t logic = 0;  ///< the inputs after the change
};

/// Opens `spec` (kind "ppk2"): its bus is the serial port (/dev/ttyACM0). Options: `mode=`
/// source (default) or ampere, `vdd=` millivolts (the supply in source mode, 800..5000; in
/// ampere mode the board's own supply voltage, for power), `rate=` samples a second after
/// decimation (default 1000: 100 raw samples a window). Three rails: 0 the window's mean
/// current (its energy), 1 and 2 its minimum and maximum (spikes a mean hides). A gap in the
/// rolling counter counts as a read error. InputError for a bad option, DeviceError for a
/// port that is not a PPK2 (no metadata within 2 s).
std::unique_ptr<Probe> open_ppk2_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock);

/// The digital-input changes a PPK2 probe has seen since this was last called (empty for
/// another probe); called from the thread that reads the probe.
std::vector<Ppk2Edge> take_ppk2_edges(Probe& probe);

}  // namespace ergon::probes
