#include "cli/boards_cmd.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "common/units.h"
#include "devices/board_file.h"
#include "devices/board_profile.h"

namespace ergon::cli {

int run_known_boards(const BoardsArgs& args, std::ostream& out) {
  const auto boards = devices::board_profiles();
  const auto problems = devices::board_file_problems();
  if (args.json) {
    nlohmann::json j = {{"boards", nlohmann::json::array()}, {"problems", problems}};
    for (const auto& b : boards) {
      nlohmann::json modes = nlohmann::json::array();
      for (const auto& m : b.power_modes) modes.push_back(m.name);
      j["boards"].push_back({{"name", b.name},
                             {"description", b.description},
                             {"cpu", b.cpu},
                             {"cores", b.cores},
                             {"ram_bytes", b.ram_bytes},
                             {"power_modes", modes},
                             {"origin", b.origin}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << fmt::format("{:<12} {:<12} {:>5} {:>10}  {:<28} {}\n", "board", "cpu", "cores", "RAM", "power modes", "from");
  for (const auto& b : boards)
    out << fmt::format("{:<12} {:<12} {:>5} {:>10}  {:<28} {}\n", b.name, b.cpu, b.cores, format_bytes(b.ram_bytes),
                       devices::power_mode_names(b), b.origin);
  for (const auto& p : problems) out << "not loaded: " << p << "\n";
  out << "board folders: ";
  const auto dirs = devices::board_search_dirs();
  for (std::size_t i = 0; i < dirs.size(); ++i) out << (i ? ", " : "") << dirs[i].string();
  out << "\n";
  return 0;
}

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
