// ergon probe list and ergon probe read: their options and runs.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/probe_cmd.h"
#include "cli/record_status.h"

namespace ergon::cli {
void add_probe_commands(CLI::App& app, Commands& commands) {
  auto* probe_cmd = app.add_subcommand("probe", "power monitors: list them, read one");
  probe_cmd->require_subcommand(1);
  auto* probe_list = probe_cmd->add_subcommand("list", "the power monitors on this machine, and why others are absent");
  static ProbeReadArgs probe_read_args;
  auto* probe_read = probe_cmd->add_subcommand("read", "sample one power monitor with a live line");
  probe_read->add_option("--probe", probe_read_args.probe,
                         "KIND:BUS@ADDRESS,key=value: ina219:/dev/i2c-1@0x40,shunt=0.1,max=3.2 "
                         "(also ina226, ina260; options shunt, max, lsb, range, brng; "
                         "ina219:mcp2221@0x40 on a USB-I2C bridge); tegrastats,interval=100 or "
                         "ina3221 (Jetson); rapl (x86); nvml (NVIDIA GPUs); "
                         "sigrok:DRIVER[@CONN],voltage=CH,current=CH; ppk2:PORT,mode=source,vdd=3300; "
                         "or sim:ina219,current=0.5,bus=5 for a simulated chip (README.md, Power monitors)")
      ->required();
  probe_read->add_option("--rate", probe_read_args.rate,
                         "samples a second, or max (the chip's fastest setting the driver keeps "
                         "up with); slower rates average more")
      ->capture_default_str();
  probe_read->add_option("--duration", probe_read_args.duration, "10s, 500ms, 2m (Ctrl-C stops early)")
      ->capture_default_str();
  probe_read->add_option("--db", probe_read_args.db, "store the samples as a run in this database");
  commands.add(probe_list, [] { return run_probe_list(std::cout); });
  commands.add(probe_read, [] { return run_probe_read(probe_read_args, std::cout, install_interrupt_counter()); });
}

}  // namespace ergon::cli
