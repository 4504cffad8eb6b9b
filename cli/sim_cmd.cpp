// ergon sim: a simulated board on a pseudo-terminal or a TCP port.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/options.h"
#include "cli/record_status.h"
#include "devices/board_profile.h"
#include "devices/link_profile.h"
#include "devices/sim_server.h"
#include "probes/sim_ppk2.h"

namespace ergon::cli {
namespace {

struct SimArgs {
  std::string board = "pi4";
  bool pty = false;
  int tcp_port = -1;
  double speed = 1.0;
  double corrupt = 0.0;
  double disconnect_after_s = 0.0;
  uint64_t seed = 1;
  std::string truth;
  bool logger = false;
  std::string power_mode;
  int threads = 1;
  bool tegrastats = false;
  std::string link;
  bool ppk2 = false;
};

/// A simulated Nordic PPK2 on a pty: a board drawing 10 mA with a 100 mA, 50 us spike every
/// 5 ms, its D0 high for the first 2 ms of each 5.
int run_sim_ppk2() {
  probes::SimPpk2 sim({.current_a = [](double t) { return std::llround(t * 1e5) % 500 < 5 ? 0.100 : 0.010; },
                       .logic = [](double t) { return static_cast<uint8_t>(std::llround(t * 1e5) % 500 < 200); }});
  std::cout << sim.port() << std::endl;
  std::cerr << fmt::format("simulating a Nordic PPK2 on {} (ergon probe read --probe ppk2:{}); Ctrl-C to stop\n",
                           sim.port(), sim.port());
  auto& interrupts = install_interrupt_counter();
  sim.start();
  while (interrupts.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  sim.stop();
  return 0;
}

int run_sim(const SimArgs& a) {
  if (a.ppk2) return run_sim_ppk2();
  const auto board = devices::board_named(a.board);
  devices::SimServerOptions opt{.speed = a.speed,
                                .corrupt_probability = a.corrupt,
                                .disconnect_after_s = a.disconnect_after_s,
                                .seed = a.seed,
                                .truth_csv = a.truth,
                                .logger = a.logger,
                                .power_mode = a.power_mode,
                                .threads = a.threads,
                                .sensor = a.tegrastats ? devices::SimPowerSensor::kTegrastats
                                                       : devices::SimPowerSensor::kIna219,
                                .link = a.link};
  std::unique_ptr<devices::SimServer> server =
      a.tcp_port >= 0
          ? devices::SimServer::listen_tcp(board, opt, static_cast<uint16_t>(a.tcp_port))
          : devices::SimServer::open_pty(board, opt);
  std::cout << server->link_name() << std::endl;
  if (a.logger) std::cout << server->logger_link_name() << std::endl;
  std::cerr << fmt::format("simulating {} ({}) on {}{}; Ctrl-C to stop\n", board.name,
                           board.description, server->link_name(),
                           a.logger ? ", measured by a power logger on " +
                                          server->logger_link_name() + " (its own clock)"
                                    : std::string());
  auto& interrupts = install_interrupt_counter();
  server->start();
  while (interrupts.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server->stop();
  return 0;
}

}  // namespace

void add_sim_command(CLI::App& app, Commands& commands) {
  static SimArgs sim;
  auto* sim_cmd = app.add_subcommand(
      "sim", "run a simulated board on a pseudo-terminal or TCP port (prints its path)");
  sim_cmd->add_option("--board", sim.board, "board: " + devices::board_names() + ", or a descriptor file")
      ->transform(board_name_or_file())
      ->capture_default_str();
  auto* pty_flag = sim_cmd->add_flag("--pty", sim.pty, "serve on a pseudo-terminal (default)");
  sim_cmd->add_option("--tcp", sim.tcp_port, "serve on 127.0.0.1:PORT (0: any free port)")
      ->excludes(pty_flag)
      ->check(CLI::Range(0, 65535));
  sim_cmd->add_option("--speed", sim.speed, "simulated seconds per wall second; 0 = unpaced")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sim_cmd->add_option("--corrupt", sim.corrupt, "probability of a bit flip per byte sent")
      ->check(CLI::Range(0.0, 1.0));
  sim_cmd->add_option("--disconnect-after", sim.disconnect_after_s,
                      "drop the link this many seconds after the run starts");
  sim_cmd->add_option("--seed", sim.seed, "random seed")->capture_default_str();
  sim_cmd->add_option("--truth", sim.truth,
                      "write every span's truth to this CSV (energy; the published profile's time and each "
                      "truth-model effect's share)");
  sim_cmd->add_flag("--logger", sim.logger,
                    "measure the board with a power logger on a second pty, on its own clock, "
                    "instead of its own monitor (prints the logger's path on a second line)")
      ->excludes("--tcp");
  sim_cmd->add_option("--power-mode", sim.power_mode,
                      "run in this power mode (default: the board's first): tx2 MAXN, "
                      "MAXP_CORE_ARM, MAXQ; pi4 1500MHz, 1000MHz, 600MHz");
  sim_cmd->add_option("--threads", sim.threads,
                      "cores its kernels run on (four busy cores heat a Pi 4 or a TX2 until it throttles)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sim_cmd->add_flag("--ppk2", sim.ppk2,
                    "simulate a Nordic PPK2 power meter instead (its serial protocol, 100 kS/s) on a pty");
  sim_cmd->add_flag("--tegrastats", sim.tegrastats,
                    "its own monitor prints like tegrastats (each reading the mean power over 100 ms, "
                    "stamped at the end) instead of sampling an INA219");
  sim_cmd->add_option("--link-kind", sim.link,
                      "the link its transfers (ergon record --link-test) take the published time and "
                      "power of: " + devices::link_names() +
                          " (default: ethernet for pi4 and tx2, uart-1m for a microcontroller)");
  commands.add(sim_cmd, [] {
    if (!sim.link.empty()) devices::link_named(sim.link);  // an unknown kind: one line, before the pty opens
    return run_sim(sim);
  });
}

}  // namespace ergon::cli
