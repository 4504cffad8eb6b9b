#pragma once
// A run as a sigrok session file (.sr, srzip version 2), for PulseView and sigrok-cli: each
// rail's power, current and voltage as analog channels, and the op spans as logic channels.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "costdb/database.h"

namespace ergon::app {

struct SigrokExport {
  uint64_t samplerate_hz = 0;  ///< of the uniform grid the samples were put on
  uint64_t samples = 0;        ///< per channel
  std::vector<std::string> analog_channels;  ///< "5V_W", "5V_A", "5V_V", ...
  std::vector<std::string> logic_channels;   ///< "busy", "forward", ..., "op0".."op7"
};

/// Writes run `run_id` to `path`. The .sr format needs one sample rate: the samples are put on
/// a grid at their own median rate, each grid point holding the last sample at or before it
/// (times on the board's clock, from the first sample). Analog channels are named for their
/// rail and unit, `RAIL_W`, `RAIL_A`, `RAIL_V` (the format has no units: sigrok-cli prints
/// them all as volts). Logic channels: `busy` (any op window), `forward`, `backward`,
/// `page-in`, `page-out`, `link` (a transfer), and the low 8 bits of the op id as `op0`..`op7`
/// (PulseView's parallel decoder shows the id). InputError for an unknown run or one without
/// samples; Error when the file cannot be written.
SigrokExport export_sigrok(costdb::Database& db, int64_t run_id, const std::filesystem::path& path);

}  // namespace ergon::app
