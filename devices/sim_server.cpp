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
#include <optional>
#include <tuple>
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
    : board_(board,
             SimBoardOptions{.seed = options.seed,
                             .corrupt_probability = options.corrupt_probability,
                             .external_logger = options.logger
                                                    ? std::optional<PowerLoggerOptions>(
                                                          PowerLoggerOptions{.seed = options.seed + 1})
                                                    : std::nullopt,
                             .power_mode = options.power_mode,
                             .threads = options.threads,
                             .time_scale = std::max(0.0, options.speed),
                             .sensor = options.sensor,
                             .link = options.link}),
      options_(options) {}

SimServer::~SimServer() {
  stop();
  for (int fd : {master_fd_, slave_fd_, listen_fd_, logger_master_fd_, logger_slave_fd_})
    if (fd >= 0) ::close(fd);
}

namespace {

/// A raw pseudo-terminal: (master, slave, slave path). The slave stays open so that the pty
/// survives the host closing and reopening it.
std::tuple<int, int, std::string> open_raw_pty() {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0)
    throw DeviceError("cannot open a pseudo-terminal: " + errno_text());
  const char* name = ::ptsname(master);
  if (name == nullptr) throw DeviceError("cannot name the pseudo-terminal: " + errno_text());
  std::string path = name;
  const int slave = ::open(name, O_RDWR | O_NOCTTY);
  if (slave < 0) throw DeviceError("cannot open " + path + ": " + errno_text());
  termios tio{};
  ::tcgetattr(slave, &tio);
  ::cfmakeraw(&tio);
  ::tcsetattr(slave, TCSANOW, &tio);
  set_nonblocking(master);
  return {master, slave, path};
}

}  // namespace

std::unique_ptr<SimServer> SimServer::open_pty(const BoardProfile& board,
                                               const SimServerOptions& options) {
  std::unique_ptr<SimServer> s(new SimServer(board, options));
  std::tie(s->master_fd_, s->slave_fd_, s->link_name_) = open_raw_pty();
  if (options.logger)
    std::tie(s->logger_master_fd_, s->logger_slave_fd_, s->logger_link_name_) = open_raw_pty();
  return s;
}

std::unique_ptr<SimServer> SimServer::listen_tcp(const BoardProfile& board,
                                                 const SimServerOptions& options,
                                                 uint16_t port) {
  if (options.logger) throw InputError("a simulated power logger needs a pty (--pty)");
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
  // Bytes waiting to go to the host on each link: the board's, and the logger's if any.
  struct Outgoing {
    std::vector<uint8_t> bytes;
    std::size_t pos = 0;
    [[nodiscard]] std::size_t pending() const { return bytes.size() - pos; }
  };
  Outgoing out, logger_out;
  uint8_t in[4096];
  const bool has_logger = logger_master_fd_ >= 0;
  auto logger_running = [&] { return board_.logger() != nullptr && board_.logger()->running(); };

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
    const bool room = out.pending() < kMaxPendingBytes && logger_out.pending() < kMaxPendingBytes;
    if ((board_.running() || logger_running()) && room) {
      const int64_t target = options_.speed > 0 || !board_.running()
                                 ? now_true_ns()
                                 : board_.cursor_ns() + kUnpacedStepNs;
      board_.advance_to(target, out.bytes, has_logger ? &logger_out.bytes : nullptr);
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

    const bool more_now = board_.running() && options_.speed <= 0 && room;
    pollfd p[2] = {{fd, static_cast<short>(POLLIN | (out.pending() > 0 ? POLLOUT : 0)), 0},
                   {logger_master_fd_,
                    static_cast<short>(POLLIN | (logger_out.pending() > 0 ? POLLOUT : 0)), 0}};
    const int timeout_ms = more_now ? 0 : (board_.running() || logger_running() ? 2 : 20);
    const int ready = ::poll(p, has_logger ? 2 : 1, timeout_ms);
    if (ready < 0 && errno != EINTR) return;
    if (ready <= 0) continue;

    if ((p[0].revents & POLLIN) != 0) {
      const ssize_t n = ::read(fd, in, sizeof in);
      if (n > 0) {
        const bool idle_before = !board_.running();
        board_.receive(in, static_cast<std::size_t>(n), now_true_ns(), out.bytes);
        if (idle_before && board_.running() && first_start_wall_ns_ < 0)
          first_start_wall_ns_ = clock.now_ns();
      } else if (n == 0 && !is_pty) {
        return;  // the host closed the TCP connection; wait for the next one
      }
    }
    if (has_logger && (p[1].revents & POLLIN) != 0) {
      const ssize_t n = ::read(logger_master_fd_, in, sizeof in);
      if (n > 0)
        board_.receive_logger(in, static_cast<std::size_t>(n), now_true_ns(), logger_out.bytes);
    }
    if ((p[0].revents & (POLLERR | POLLHUP)) != 0 && !is_pty) return;
    auto write_some = [&](int to, short revents, Outgoing& o) {
      if ((revents & POLLOUT) == 0 || o.pending() == 0) return true;
      const ssize_t n = ::write(to, o.bytes.data() + o.pos, o.pending());
      if (n > 0) o.pos += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR && !is_pty) return false;
      if (o.pending() == 0) {
        o.bytes.clear();
        o.pos = 0;
      }
      return true;
    };
    if (!write_some(fd, p[0].revents, out)) return;
    if (has_logger) write_some(logger_master_fd_, p[1].revents, logger_out);
  }
}

void write_truth_csv(const std::filesystem::path& path, const SimBoard& board) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw InputError("cannot write " + tmp.string());
    f << "run_tag,op_id,phase,begin_ticks,end_ticks,repetitions,begin_ns,end_ns,power_w,"
         "energy_j,frame_intact,throttled,temperature_c,profile_time_s,profile_energy_j,"
         "working_set_s,throttling_s,jitter_s,storage_s,cold_start_s\n";
    f.precision(12);
    for (const TruthSpan& t : board.truth()) {
      f << t.run_tag << ',' << t.op_id << ',' << profiler::to_string(t.phase) << ','
        << t.begin_ticks << ',' << t.end_ticks << ',' << t.repetitions << ',' << t.begin_ns
        << ',' << t.end_ns << ',' << t.power_w << ',' << t.energy_j << ','
        << (t.frame_intact ? 1 : 0) << ',' << (t.throttled ? 1 : 0) << ',' << t.temperature_c << ','
        << t.profile_time_s << ',' << t.profile_energy_j << ',' << t.time_by.working_set << ','
        << t.time_by.throttling << ',' << t.time_by.jitter << ',' << t.time_by.storage << ','
        << t.time_by.cold_start << '\n';
    }
  }
  std::filesystem::rename(tmp, path);  // readers never see a half-written file
}

}  // namespace ergon::devices
