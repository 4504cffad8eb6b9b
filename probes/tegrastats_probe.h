#pragma once

#include <memory>
#include <string>

#include "common/clock.h"
#include "probes/probe.h"

namespace ergon::probes {

/// Power from tegrastats on a Jetson: runs `PROGRAM --interval MS` as a child process, reads
/// its lines as they come (stderr too: an error message is not a reading) and turns each line
/// into one sample per rail, stamped with the host clock when the line arrived. Channel 0 is
/// the module's input rail (VDD_IN, POM_5V_IN, VIN_SYS_5V0*) when the board has one, the
/// parts follow; tegrastats gives power only (no voltage, no current). Lines it cannot parse
/// are counted as read errors and skipped. `program` is looked up in PATH. start() throws
/// DeviceError when the program cannot be started, or exits, or prints no power rail within
/// three intervals.
std::unique_ptr<Probe> open_tegrastats(const std::string& program, int interval_ms,
                                       const Clock& clock);

}  // namespace ergon::probes
