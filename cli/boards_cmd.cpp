#include "cli/boards_cmd.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

namespace ergon::cli {

int run_boards(const BoardsArgs& args, devices::UsbDeviceSource& source, std::ostream& out) {
  const auto found = devices::discover_boards(source, args.sysfs, args.all);
  if (args.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : found) {
      j.push_back({{"usb_path", d.usb.path},
                   {"vendor_id", fmt::format("{:04x}", d.usb.vendor_id)},
                   {"product_id", fmt::format("{:04x}", d.usb.product_id)},
                   {"role", devices::to_string(d.role)},
                   {"what", d.what},
                   {"board", d.board},
                   {"ttys", d.ttys},
                   {"manufacturer", d.manufacturer},
                   {"product", d.product},
                   {"serial", d.serial},
                   {"next", d.next_step}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  if (found.empty()) {
    out << "no boards, bootloaders, power-monitor bridges or USB-serial adapters on USB"
        << (args.all ? "" : " (--all lists every USB device)") << "\n";
    return 0;
  }
  for (const auto& d : found) {
    std::string strings = d.product.empty() ? "" : " \"" + d.product + "\"";
    if (!d.serial.empty()) strings += " serial " + d.serial;
    out << fmt::format("{:<10} {:04x}:{:04x}  {}{}{}\n", d.usb.path, d.usb.vendor_id, d.usb.product_id, d.what,
                       strings, d.ttys.empty() ? "" : "  " + fmt::format("{}", fmt::join(d.ttys, " ")));
    if (!d.next_step.empty()) out << fmt::format("{:<10} -> {}\n", "", d.next_step);
  }
  return 0;
}

}  // namespace ergon::cli
