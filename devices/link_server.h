#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace ergon::devices {

/// The board side of a link, for the Linux agent and the host-built firmware. `spec`:
/// "pty" (a new pseudo-terminal, served once), a serial device path ("/dev/ttyGS0", served
/// once, raw at 115200), or "tcp:HOST:PORT" (listen; port 0 picks one; each host that
/// connects is served in turn until `stop`). `on_listening` gets what a host passes to
/// `ergon record --port`; `serve` gets each connection's file descriptor, which it owns.
/// Throws DeviceError when the link cannot be opened, InputError for a malformed spec.
void serve_link(const std::string& spec, const std::atomic<bool>& stop,
                const std::function<void(const std::string&)>& on_listening,
                const std::function<void(int fd)>& serve);

}  // namespace ergon::devices
