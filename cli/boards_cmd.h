#pragma once

#include <filesystem>
#include <iosfwd>

#include "devices/host/discovery.h"

namespace ergon::cli {

struct BoardsArgs {
  bool all = false;   ///< unknown USB devices too
  bool json = false;
  bool known = false;  ///< the board descriptors this ergon knows, not USB
  std::filesystem::path sysfs = "/sys";
};

/// `ergon boards`: the USB boards, bootloaders, Jetsons in recovery, power-monitor bridges and
/// USB-serial adapters attached, each with its tty and what to run next. Returns the exit code.
int run_boards(const BoardsArgs& args, devices::UsbDeviceSource& source, std::ostream& out);
/// `ergon boards --known`: every board descriptor this ergon knows (built in, board folders),
/// where each comes from, and the user files that did not load. Returns the exit code.
int run_known_boards(const BoardsArgs& args, std::ostream& out);

}  // namespace ergon::cli
