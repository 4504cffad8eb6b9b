#include "cli/record.h"

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <ostream>

#include "app/db_sink.h"
#include "common/clock.h"
#include "common/error.h"
#include "costdb/database.h"
#include "devices/host/recorder.h"

namespace ergon::cli {
namespace {

std::atomic<int> g_interrupts{0};

extern "C" void on_signal(int /*signo*/) { g_interrupts.fetch_add(1); }

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (1U << 20)) return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6);
  if (bytes >= 1024) return fmt::format("{:.1f} kB", static_cast<double>(bytes) / 1e3);
  return fmt::format("{} B", bytes);
}

struct Rate {
  uint64_t last_samples = 0;
  int64_t last_ns = 0;
  double per_s = 0;
};

}  // namespace

std::atomic<int>& install_interrupt_counter() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return g_interrupts;
}

std::vector<BoardOutcome> record_boards(const RecordRequest& request, std::ostream& out,
                                        const std::atomic<int>& interrupts) {
  if (request.logger_port && request.ports.size() != 1)
    throw InputError("a power logger measures one board: pass exactly one --port with --logger");
  costdb::Database db = costdb::Database::open(request.db_path);
  const SteadyClock clock;
  devices::Recorder recorder(clock);
  std::vector<std::unique_ptr<app::DbSink>> sinks;
  std::vector<std::string> ports = request.ports;
  if (request.logger_port) ports.push_back(*request.logger_port);
  for (const auto& port : ports) {
    sinks.push_back(std::make_unique<app::DbSink>(db, port));
    recorder.add(port, request.baud, request.options, *sinks.back());
  }

  const bool tty = ::isatty(STDOUT_FILENO) == 1 && &out == &std::cout;
  std::vector<Rate> rates(ports.size());
  int64_t last_line_ns = 0;
  std::size_t last_width = 0;

  std::vector<const devices::RecordSession*> final_sessions;
  auto progress = [&](std::span<const devices::RecordSession* const> sessions) {
    final_sessions.assign(sessions.begin(), sessions.end());
    const int64_t now = clock.now_ns();
    for (std::size_t i = 0; i < sessions.size(); ++i)
      sinks[i]->status(sessions[i]->state(), sessions[i]->stats(), now);
    db.commit_batch();
    for (std::size_t i = 0; i < sessions.size(); ++i) sinks[i]->mark_committed(sessions[i]->stats());

    if (!tty && now - last_line_ns < 1'000'000'000) return;
    last_line_ns = now;
    std::string line;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      const auto& s = *sessions[i];
      const auto& st = s.stats();
      Rate& r = rates[i];
      if (r.last_ns != 0 && now > r.last_ns) {
        r.per_s = static_cast<double>(st.samples - r.last_samples) * 1e9 /
                  static_cast<double>(now - r.last_ns);
      }
      r.last_samples = st.samples;
      r.last_ns = now;
      const std::string name = s.hello() ? s.hello()->name : s.source();
      if (!line.empty()) line += " | ";
      line += fmt::format("{} {}: {} samples ({:.0f}/s), {} spans, lost {} frames, {} crc, {}, "
                          "committed {}",
                          name, devices::to_string(s.state()), st.samples, r.per_s, st.spans,
                          st.decoder.frames_lost, st.decoder.crc_errors,
                          human_bytes(st.decoder.bytes), sinks[i]->committed_samples());
    }
    if (tty) {
      const std::size_t width = line.size();
      if (width < last_width) line.append(last_width - width, ' ');
      last_width = width;
      out << '\r' << line << std::flush;
    } else {
      out << line << std::endl;
    }
  };

  recorder.run(progress, interrupts);
  if (tty) out << '\n';

  // The recorder has returned: sessions are final and their last status is stored.
  if (request.logger_port && sinks[0]->run_id() && sinks[1]->run_id()) {
    if (final_sessions[1]->is_power_logger()) {
      costdb::set_power_run(db, *sinks[0]->run_id(), *sinks[1]->run_id());
      db.commit_batch();
    } else {
      out << request.logger_port.value() << " is not a power logger (its Hello says "
          << (final_sessions[1]->hello() ? final_sessions[1]->hello()->kind_name : "nothing")
          << "); the runs are not linked\n";
    }
  }
  std::vector<BoardOutcome> outcomes;
  for (std::size_t i = 0; i < final_sessions.size(); ++i) {
    const auto& s = *final_sessions[i];
    outcomes.push_back({.port = s.source(),
                        .state = s.state(),
                        .error = s.error(),
                        .run_id = sinks[i]->run_id(),
                        .stats = s.stats()});
    if (s.hello() && s.hello()->mode_switch_ns)
      outcomes.back().mode_switch_s = static_cast<double>(*s.hello()->mode_switch_ns) * 1e-9;
  }
  return outcomes;
}

}  // namespace ergon::cli
