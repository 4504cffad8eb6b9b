#include "devices/sim_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/clock.h"
#include "common/error.h"

namespace ergon::devices {
namespace {

constexpr std::size_t kMaxPendingBytes = 256 * 1024;  // backpressure: generate no further ahead
constexpr int64_t kUnpacedStepNs = 20'000'000;        // simulated time per step when unpaced

std::string errno_text() { return std::strerror(errno); }

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

SimServer::SimServer(const BoardProfile& board, const SimServerOptions& options)
    : board_(board, SimBoardOptions{.seed = options.seed,
                                    .corrupt_probability = options.corrupt_probability}),
      options_(options) {}

SimServer::~SimServer() {
  stop();
  for (int fd : {master_fd_, slave_fd_, listen_fd_})
    if (fd >= 0) ::close(fd);
}

std::unique_ptr<SimServer> SimServer::open_pty(const BoardProfile& board,
                                               const SimServerOptions& options) {
  std::unique_ptr<SimServer> s(new SimServer(board, options));
  s->master_fd_ = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (s->master_fd_ < 0 || ::grantpt(s->master_fd_) != 0 || ::unlockpt(s->master_fd_) != 0)
    throw DeviceError("cannot open a pseudo-terminal: " + errno_text());
  const char* name = ::ptsname(s->master_fd_);
  if (name == nullptr) throw DeviceError("cannot name the pseudo-terminal: " + errno_text());
  s->link_name_ = name;
  s->slave_fd_ = ::open(name, O_RDWR | O_NOCTTY);
  if (s->slave_fd_ < 0) throw DeviceError("cannot open " + s->link_name_ + ": " + errno_text());
  termios tio{};
  ::tcgetattr(s->slave_fd_, &tio);
  ::cfmakeraw(&tio);
  ::tcsetattr(s->slave_fd_, TCSANOW, &tio);
  set_nonblocking(s->master_fd_);
  return s;
}

std::unique_ptr<SimServer> SimServer::listen_tcp(const BoardProfile& board,
                                                 const SimServerOptions& options,
                                                 uint16_t port) {
  std::unique_ptr<SimServer> s(new SimServer(board, options));
  s->listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s->listen_fd_ < 0) throw DeviceError("cannot create a socket: " + errno_text());
  int one = 1;
  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(s->listen_fd_, 1) != 0)
    throw DeviceError("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + errno_text());
  socklen_t len = sizeof addr;
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  s->link_name_ = "tcp:127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  set_nonblocking(s->listen_fd_);
  return s;
}

void SimServer::start() {
  stop_flag_ = false;
  thread_ = std::thread([this] { run(stop_flag_); });
}

void SimServer::stop() {
  stop_flag_ = true;
  if (thread_.joinable()) thread_.join();
}

void SimServer::run(const std::atomic<bool>& stop) {
  wall0_ns_ = SteadyClock().now_ns();
  if (master_fd_ >= 0) {
    serve_fd(master_fd_, stop, true);
    return;
  }
  while (!stop) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) continue;
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblocking(client);
    serve_fd(client, stop, false);
    ::close(client);
    if (dropped_) return;
  }
}

void SimServer::serve_fd(int fd, const std::atomic<bool>& stop, bool is_pty) {
  const SteadyClock clock;
  std::vector<uint8_t> out;
  std::size_t out_pos = 0;
  uint8_t in[4096];

  // True simulation time. Paced: wall time x speed. Unpaced: wall time, pushed forward
  // whenever the plan has been simulated further ahead.
  auto now_true_ns = [&] {
    const int64_t wall = clock.now_ns() - wall0_ns_;
    if (options_.speed > 0) return static_cast<int64_t>(static_cast<double>(wall) * options_.speed);
    skew_ns_ = std::max(skew_ns_, board_.cursor_ns() - wall);
    return wall + skew_ns_;
  };

  while (!stop) {
    const bool was_running = board_.running();
    if (board_.running() && out.size() - out_pos < kMaxPendingBytes) {
      const int64_t target =
          options_.speed > 0 ? now_true_ns() : board_.cursor_ns() + kUnpacedStepNs;
      board_.advance_to(target, out);
    }
    if (was_running && !board_.running() && !options_.truth_csv.empty())
      write_truth_csv(options_.truth_csv, board_);

    if (options_.disconnect_after_s > 0 && first_start_wall_ns_ >= 0 &&
        clock.now_ns() - first_start_wall_ns_ >
            static_cast<int64_t>(options_.disconnect_after_s * 1e9)) {
      dropped_ = true;
      if (is_pty) {
        // Unplugged: the pty goes away and the host's reads fail.
        ::close(slave_fd_);
        slave_fd_ = -1;
        ::close(master_fd_);
        master_fd_ = -1;
      }
      return;
    }

    const bool pending = out_pos < out.size();
    const bool more_now = board_.running() && options_.speed <= 0 &&
                          out.size() - out_pos < kMaxPendingBytes;
    pollfd p{fd, static_cast<short>(POLLIN | (pending ? POLLOUT : 0)), 0};
    const int timeout_ms = more_now ? 0 : (board_.running() ? 2 : 20);
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno != EINTR) return;
    if (ready <= 0) continue;

    if ((p.revents & POLLIN) != 0) {
      const ssize_t n = ::read(fd, in, sizeof in);
      if (n > 0) {
        const bool idle_before = !board_.running();
        board_.receive(in, static_cast<std::size_t>(n), now_true_ns(), out);
        if (idle_before && board_.running() && first_start_wall_ns_ < 0)
          first_start_wall_ns_ = clock.now_ns();
      } else if (n == 0 && !is_pty) {
        return;  // the host closed the TCP connection; wait for the next one
      }
    }
    if ((p.revents & (POLLERR | POLLHUP)) != 0 && !is_pty) return;
    if ((p.revents & POLLOUT) != 0 && out_pos < out.size()) {
      const ssize_t n = ::write(fd, out.data() + out_pos, out.size() - out_pos);
      if (n > 0) out_pos += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR && !is_pty) return;
      if (out_pos == out.size()) {
        out.clear();
        out_pos = 0;
      }
    }
  }
}

void write_truth_csv(const std::filesystem::path& path, const SimBoard& board) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw InputError("cannot write " + tmp.string());
    f << "run_tag,op_id,phase,begin_ticks,end_ticks,repetitions,begin_ns,end_ns,power_w,"
         "energy_j,frame_intact\n";
    f.precision(12);
    for (const TruthSpan& t : board.truth()) {
      f << t.run_tag << ',' << t.op_id << ',' << profiler::to_string(t.phase) << ','
        << t.begin_ticks << ',' << t.end_ticks << ',' << t.repetitions << ',' << t.begin_ns
        << ',' << t.end_ns << ',' << t.power_w << ',' << t.energy_j << ','
        << (t.frame_intact ? 1 : 0) << '\n';
    }
  }
  std::filesystem::rename(tmp, path);  // readers never see a half-written file
}

}  // namespace ergon::devices
