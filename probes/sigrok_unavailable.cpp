// A build without libsigrok (the arm64 agent): a sigrok probe says so.
#include "common/error.h"
#include "probes/sigrok_probe.h"

namespace ergon::probes {

std::unique_ptr<Probe> open_sigrok_probe(const ProbeSpec& spec, double, const Clock&) {
  throw DeviceError("probe '" + spec.text + "': this ergon was built without libsigrok (Debian libsigrok-dev)");
}

}  // namespace ergon::probes
