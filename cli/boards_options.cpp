// ergon boards: its options and run.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/boards_cmd.h"
#include "devices/host/discovery.h"

namespace ergon::cli {
void add_boards_command(CLI::App& app, Commands& commands) {
  static BoardsArgs boards_args;
  auto* boards_cmd = app.add_subcommand(
      "boards", "the boards on USB (and boards in bootloaders, Jetsons in recovery, USB-I2C "
                "bridges, USB-serial adapters), each with its tty and what to run next");
  boards_cmd->add_flag("--all", boards_args.all, "every USB device, known or not");
  boards_cmd->add_flag("--json", boards_args.json, "print the list as JSON");
  boards_cmd->add_flag("--known", boards_args.known,
                       "list the board descriptors this ergon knows (built in and in board folders) instead");
  boards_cmd->add_option("--sysfs", boards_args.sysfs, "where sysfs is mounted")->capture_default_str();
  commands.add(boards_cmd, [] {
    if (boards_args.known) return run_known_boards(boards_args, std::cout);
    const auto usb = devices::libusb_device_source();
    return run_boards(boards_args, *usb, std::cout);
  });
}

}  // namespace ergon::cli
