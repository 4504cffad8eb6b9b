#pragma once
// Any instrument libsigrok drives that has analog channels (bench multimeters, USB power
// meters, oscilloscopes, its `demo` driver), as a probe: `sigrok:DRIVER[@CONN],...`
// (docs/boards.md, "Power monitors"). libsigrok stays inside sigrok_probe.cpp; a build without
// it (the arm64 agent) says so when such a probe is opened.

#include <memory>

#include "common/clock.h"
#include "probes/probe.h"

namespace ergon::probes {

/// Opens `spec` (kind "sigrok"): its bus is the driver, with `@CONN` (a serial port, a USB
/// address) where the driver needs one. Options (channel names as the device names them):
/// `voltage=CH`, `current=CH`, `power=CH` say which channel measures what (default: each
/// analog channel's own measured quantity); `bus=V` is the supply voltage where only current
/// is measured; `rate` sets the sample rate in Hz where the device has one. One rail (id 0,
/// named `rail=` or the driver's name) whose samples combine the channels sample by sample;
/// power is the device's where it measures power, else volts x amperes. Throws InputError for
/// a driver or channel that does not exist, DeviceError for a device that cannot be opened.
std::unique_ptr<Probe> open_sigrok_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock);

}  // namespace ergon::probes
