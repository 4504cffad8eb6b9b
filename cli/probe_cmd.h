#pragma once

#include <atomic>
#include <iosfwd>
#include <string>

namespace ergon::cli {

struct ProbeReadArgs {
  std::string probe;           ///< a probe spec (probes::parse_probe_spec)
  std::string rate = "max";    ///< "max" or samples a second
  std::string duration = "10s";  ///< "10s", "500ms", "2m" or plain seconds
  std::string db;              ///< empty: do not store
};

/// `ergon probe read`: samples one probe for a while with a live line (rate achieved against
/// the chip's, mean power, overflows, read errors); optionally stores the samples as a run.
int run_probe_read(const ProbeReadArgs& args, std::ostream& out, const std::atomic<int>& interrupts);

/// `ergon probe list`: the probes this machine has (I2C buses and the INA2xx chips answering
/// on them), each absent kind with why, and the simulated chips.
int run_probe_list(std::ostream& out);

}  // namespace ergon::cli
