#include "probes/tegrastats_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "common/error.h"
#include "probes/tegrastats.h"

extern char** environ;

namespace ergon::probes {
namespace {

class TegrastatsProbe final : public Probe {
 public:
  TegrastatsProbe(std::string program, int interval_ms, const Clock& clock)
      : program_(std::move(program)), interval_ms_(interval_ms), clock_(clock) {
    info_.kind = "tegrastats";
    info_.location = program_ + " --interval " + std::to_string(interval_ms_);
    info_.max_rate_hz = 1000.0 / interval_ms_;
    info_.power = true;
  }
  ~TegrastatsProbe() override { stop(); }
  TegrastatsProbe(const TegrastatsProbe&) = delete;
  TegrastatsProbe& operator=(const TegrastatsProbe&) = delete;

  [[nodiscard]] const ProbeInfo& info() const override { return info_; }

  void start() override {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw DeviceError(std::string("cannot start tegrastats: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    const std::string interval = std::to_string(interval_ms_);
    char* argv[] = {const_cast<char*>(program_.c_str()), const_cast<char*>("--interval"),
                    const_cast<char*>(interval.c_str()), nullptr};
    const int rc = ::posix_spawnp(&pid_, program_.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      pid_ = -1;
      throw DeviceError("cannot run " + program_ + ": " + std::strerror(rc) +
                        (rc == ENOENT ? " (tegrastats ships with L4T on Jetson boards; is this one?)"
                                      : ""));
    }
    fd_ = fds[0];
    // The first line with rails names the channels.
    const int64_t deadline = clock_.now_ns() + 3LL * interval_ms_ * 1'000'000 + 2'000'000'000;
    while (pending_.empty()) {
      if (!pump(deadline))
        throw DeviceError(program_ + " printed no power rail within " +
                          std::to_string((deadline - clock_.now_ns()) / 1'000'000'000 + 3) + " s" +
                          (last_text_.empty() ? "" : " (it said: " + last_text_ + ")"));
    }
    const TegrastatsLine& first = pending_.front().line;
    order_.clear();
    if (first.total >= 0) order_.push_back(first.rails[first.total].name);
    for (std::size_t i = 0; i < first.rails.size(); ++i)
      if (static_cast<int>(i) != first.total) order_.push_back(first.rails[i].name);
    info_.total_known = first.total >= 0;
    info_.channels.clear();
    for (std::size_t i = 0; i < order_.size(); ++i)
      info_.channels.push_back({static_cast<uint8_t>(i), order_[i]});
  }

  void stop() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

  std::size_t read(std::vector<PowerSample>& out) override {
    if (fd_ < 0) throw DeviceError("tegrastats is not running (start it first)");
    const int64_t deadline = clock_.now_ns() + 10LL * interval_ms_ * 1'000'000 + 1'000'000'000;
    while (pending_.empty())
      if (!pump(deadline))
        throw DeviceError(program_ + " printed nothing for " +
                          std::to_string(10 * interval_ms_ + 1000) + " ms");
    const Arrived a = std::move(pending_.front());
    pending_.pop_front();
    std::size_t n = 0;
    for (const TegrastatsRail& r : a.line.rails) {
      for (std::size_t ch = 0; ch < order_.size(); ++ch) {
        if (order_[ch] != r.name) continue;
        PowerSample s;
        s.rail = static_cast<uint8_t>(ch);
        s.t_ticks = static_cast<uint64_t>(a.host_ns);
        s.power_uw = static_cast<int32_t>(std::min<uint64_t>(uint64_t{r.now_mw} * 1000, INT32_MAX));
        out.push_back(s);
        ++n;
      }
    }
    return n;
  }

  [[nodiscard]] uint64_t read_errors() const override { return stream_.malformed(); }

 private:
  struct Arrived {
    TegrastatsLine line;
    int64_t host_ns;
  };

  /// Reads what the child printed, waiting until `deadline_ns`. False on timeout; throws
  /// DeviceError when the child has exited.
  bool pump(int64_t deadline_ns) {
    for (;;) {
      const int64_t left_ms = (deadline_ns - clock_.now_ns()) / 1'000'000;
      if (left_ms <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
      if (ready < 0 && errno != EINTR) throw DeviceError(std::string("reading tegrastats: ") + std::strerror(errno));
      if (ready <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) {
        int status = 0;
        if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) pid_ = -1;
        throw DeviceError(program_ + " exited" +
                          (WIFEXITED(status) ? " with status " + std::to_string(WEXITSTATUS(status))
                                             : std::string()) +
                          (last_text_.empty() ? "" : ": " + last_text_));
      }
      const int64_t now = clock_.now_ns();
      const std::string_view bytes(buf, static_cast<std::size_t>(n));
      remember_text(bytes);
      const std::size_t before = pending_.size();
      stream_.feed(bytes, [&](const TegrastatsLine& l) { pending_.push_back({l, now}); });
      if (pending_.size() > before) return true;
    }
  }

  /// The last line that is not a reading, for error messages (e.g. "requires root").
  void remember_text(std::string_view bytes) {
    for (char c : bytes) {
      if (c == '\n') {
        if (!partial_.empty() && !parse_tegrastats_line(partial_)) last_text_ = partial_;
        partial_.clear();
      } else if (partial_.size() < 200) {
        partial_.push_back(c);
      }
    }
  }

  std::string program_;
  int interval_ms_;
  const Clock& clock_;
  ProbeInfo info_;
  pid_t pid_ = -1;
  int fd_ = -1;
  TegrastatsStream stream_;
  std::deque<Arrived> pending_;
  std::vector<std::string> order_;
  std::string partial_, last_text_;
};

}  // namespace

std::unique_ptr<Probe> open_tegrastats(const std::string& program, int interval_ms,
                                       const Clock& clock) {
  if (interval_ms < 1) throw InputError("tegrastats interval must be at least 1 ms");
  return std::make_unique<TegrastatsProbe>(program, interval_ms, clock);
}

}  // namespace ergon::probes
