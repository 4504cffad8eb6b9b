// ergon-agent: the board side on a Linux board (Raspberry Pi 4, Jetson TX2) or on the host.

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <iostream>

#include "common/error.h"
#include "agent/agent.h"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ergon-agent: run Ergon's profile plans and schedules on this board, with real "
               "kernels and its power probe, and stream them to ergon record"};
  ergon::agent::AgentOptions options;
  app.add_option("--link", options.link,
                 "tcp:HOST:PORT (listen), pty (a new pseudo-terminal) or a serial device "
                 "(/dev/ttyGS0 for USB gadget serial, /dev/ttyAMA0)")
      ->capture_default_str();
  app.add_option("--probe", options.probe,
                 "the board's power probe: ina219:/dev/i2c-1@0x40,shunt=0.01 (Pi 4), "
                 "tegrastats or ina3221 (Jetson), sim:ina219 (no hardware); none (the default): spans "
                 "only, time costs without energy");
  app.add_option("--board", options.board,
                 "the board kind to declare: pi4, tx2; without it this machine is a Linux host (kind "
                 "'host', no published profile: only measured costs)");
  app.add_option("--scratch", options.scratch, "directory for page-outs (the board's storage)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  options.on_listening = [](const std::string& link) {
    std::cout << link << std::endl;
    std::cerr << "ergon-agent: waiting for ergon record --port " << link << "\n";
  };
  try {
    ergon::agent::run_agent(options, g_stop);
  } catch (const ergon::Error& e) {
    std::cerr << "ergon-agent: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
