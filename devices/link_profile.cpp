#include "devices/link_profile.h"

#include "common/error.h"

namespace ergon::devices {

const std::vector<LinkProfile>& link_profiles() {
  static const std::vector<LinkProfile> links = [] {
    std::vector<LinkProfile> v;
    {
      LinkProfile l;
      l.name = "ethernet";
      l.description = "gigabit Ethernet, TCP (Raspberry Pi 4)";
      l.bytes_per_s = 117.5e6;
      l.latency_s = 0.43e-3 / 2;
      l.full_duplex = true;
      l.sources = {"rate: iperf3 on a Raspberry Pi 4, 941 Mbit/s = ~117.5 MB/s, mean of five runs "
                   "(mpr-projects.com, 'RPi NAS part 3: network connections', 2023-12-15)",
                   "latency: half the minimum round trip of 0.43 ms between two hosts and a Raspberry Pi on a "
                   "LAN (SLAC confluence, pinger-raspberry; the Pi model is not stated)",
                   "energy: no published figure of a Pi 4's power above idle while its NIC moves data"};
      v.push_back(l);
    }
    {
      LinkProfile l;
      l.name = "usb-cdc";
      l.description = "USB full-speed CDC-ACM (nRF52840 as the device)";
      l.bytes_per_s = 96e3;
      l.latency_s = 1e-3;
      l.full_duplex = false;  // one bus, host-scheduled
      // 2.4 mA from VBUS (5 V) while USB is active, at 96 kB/s: the device end only.
      l.tx_j_per_byte = 2.4e-3 * 5.0 / 96e3;
      l.sources = {"rate: 96 KB/s CDC-ACM on an nRF52840 DK with logging off (zephyrproject-rtos/zephyr "
                   "issue 14288)",
                   "latency: a full-speed USB frame, 1 ms (USB 2.0 specification)",
                   "energy: I_USB,ACTIVE,VBUS = 2.4 mA (nRF52840 product specification, USBD), at 5 V: the "
                   "device end; the host end has no published figure"};
      v.push_back(l);
    }
    for (const auto& [name, baud] : {std::pair<std::string_view, double>{"uart-115200", 115200},
                                     std::pair<std::string_view, double>{"uart-1m", 1e6}}) {
      LinkProfile l;
      l.name = name;
      l.description = baud > 2e5 ? "UART at 1 Mbaud, 8N1" : "UART at 115200 baud, 8N1";
      l.bytes_per_s = baud / 10;    // 8N1: ten bit times a byte
      l.latency_s = 10 / baud;      // one character in flight
      l.full_duplex = true;
      l.sources = {"rate and latency: 8N1 framing, ten bit times per byte (arithmetic)",
                   "energy: no confirmed figure of the UARTE's current on these boards"};
      v.push_back(l);
    }
    return v;
  }();
  return links;
}

std::string link_names() {
  std::string out;
  for (const auto& l : link_profiles()) out += (out.empty() ? "" : ", ") + std::string(l.name);
  return out;
}

LinkProfile link_named(std::string_view name) {
  for (const auto& l : link_profiles())
    if (l.name == name) return l;
  throw InputError("link '" + std::string(name) + "' is unknown (known: " + link_names() + ")");
}

std::string_view default_link(std::string_view board_a, std::string_view board_b) {
  auto linux_board = [](std::string_view b) { return b == "pi4" || b == "tx2"; };
  return linux_board(board_a) && linux_board(board_b) ? "ethernet" : "uart-1m";
}

}  // namespace ergon::devices
