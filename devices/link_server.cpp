#include "devices/link_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace ergon::devices {
namespace {

std::string errno_text() { return std::strerror(errno); }

void set_raw(int fd) {
  termios tio{};
  if (::tcgetattr(fd, &tio) == 0) {
    ::cfmakeraw(&tio);
    ::cfsetspeed(&tio, B115200);
    ::tcsetattr(fd, TCSANOW, &tio);
  }
}

}  // namespace

void serve_link(const std::string& spec, const std::atomic<bool>& stop,
                const std::function<void(const std::string&)>& on_listening,
                const std::function<void(int fd)>& serve) {
  if (spec == "pty") {
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0)
      throw DeviceError("cannot open a pseudo-terminal: " + errno_text());
    const std::string path = ::ptsname(master);
    const int keep = ::open(path.c_str(), O_RDWR | O_NOCTTY);  // the pty lives while we do
    set_raw(keep);
    if (on_listening) on_listening(path);
    serve(master);
    ::close(keep);
    return;
  }
  if (spec.rfind("tcp:", 0) != 0) {
    const int fd = ::open(spec.c_str(), O_RDWR | O_NOCTTY);
    if (fd < 0) throw DeviceError("cannot open " + spec + ": " + errno_text());
    set_raw(fd);
    if (on_listening) on_listening(spec);
    serve(fd);
    return;
  }
  const std::string rest = spec.substr(4);
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) throw InputError("--link tcp:HOST:PORT, not " + spec);
  char* end = nullptr;
  const long port = std::strtol(rest.c_str() + colon + 1, &end, 10);
  if (end == rest.c_str() + colon + 1 || *end != '\0' || port < 0 || port > 65535)
    throw InputError("--link: '" + rest.substr(colon + 1) + "' is not a TCP port");
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, rest.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    ::close(listener);
    throw InputError("--link: '" + rest.substr(0, colon) + "' is not an IPv4 address");
  }
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 1) != 0) {
    const std::string why = errno_text();
    ::close(listener);
    throw DeviceError("cannot listen on " + rest + ": " + why);
  }
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  if (on_listening) on_listening("tcp:" + rest.substr(0, colon) + ":" + std::to_string(ntohs(addr.sin_port)));
  while (!stop) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    serve(client);  // until the host goes away; then wait for the next one
  }
  ::close(listener);
}

}  // namespace ergon::devices
