#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ergon::devices {

/// What moving bytes between two boards over one kind of link costs, from published figures
/// (each with its source in `sources`; docs/pipeline.md, "Link figures"). Energy above idle is
/// unset where nothing published gives it: a prediction then says its link energy is missing,
/// never counts it as zero silently.
struct LinkProfile {
  std::string_view name;         ///< CLI name: ethernet, usb-cdc, uart-115200, uart-1m
  std::string_view description;
  double bytes_per_s = 0;        ///< sustained payload rate
  double latency_s = 0;          ///< one way, per transfer
  bool full_duplex = true;
  std::optional<double> tx_j_per_byte;  ///< sender's energy above idle
  std::optional<double> rx_j_per_byte;  ///< receiver's energy above idle
  std::vector<std::string_view> sources;
};

const std::vector<LinkProfile>& link_profiles();
/// "ethernet, usb-cdc, uart-115200, uart-1m".
std::string link_names();
/// The profile called `name`, or InputError listing the known ones.
LinkProfile link_named(std::string_view name);
/// The link ergon assumes between two boards when none is named: ethernet between two Linux
/// boards (pi4, tx2), uart-1m where a microcontroller is on either end.
std::string_view default_link(std::string_view board_a, std::string_view board_b);

}  // namespace ergon::devices
