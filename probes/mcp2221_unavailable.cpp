// Builds without libusb (a board's cross build): the MCP2221A bridge is not available, and
// says so; the rest of the I2C support does not depend on it.

#include "common/error.h"
#include "probes/mcp2221.h"

namespace ergon::probes {

std::vector<std::string> find_mcp2221() { return {}; }

std::unique_ptr<HidTransport> open_mcp2221_usb(int) {
  throw DeviceError("this build of ergon has no USB support (built without libusb-1.0): the "
                    "MCP2221A bridge is not available");
}

}  // namespace ergon::probes
