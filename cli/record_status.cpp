#include "cli/record_status.h"

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <ostream>
#include <string>

#include "common/units.h"

namespace ergon::cli {
namespace {

std::atomic<int> g_interrupts{0};

extern "C" void on_signal(int /*signo*/) { g_interrupts.fetch_add(1); }

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

std::vector<app::BoardOutcome> record_with_status(const app::RecordRequest& request, std::ostream& out,
                                                  const std::atomic<int>& interrupts) {
  const bool tty = ::isatty(STDOUT_FILENO) == 1 && &out == &std::cout;
  std::vector<Rate> rates;
  int64_t last_line_ns = 0;
  std::size_t last_width = 0;
  auto show = [&](std::span<const app::BoardStatus> boards, int64_t now) {
    if (!tty && now - last_line_ns < 1'000'000'000) return;
    last_line_ns = now;
    rates.resize(boards.size());
    std::string line;
    for (std::size_t i = 0; i < boards.size(); ++i) {
      const app::BoardStatus& b = boards[i];
      Rate& r = rates[i];
      if (r.last_ns != 0 && now > r.last_ns)
        r.per_s = static_cast<double>(b.stats.samples - r.last_samples) * 1e9 / static_cast<double>(now - r.last_ns);
      r.last_samples = b.stats.samples;
      r.last_ns = now;
      if (!line.empty()) line += " | ";
      line += fmt::format("{} {}: {} samples ({:.0f}/s), {} spans, lost {} frames, {} crc, {}, committed {}",
                          b.name, devices::to_string(b.state), b.stats.samples, r.per_s, b.stats.spans,
                          b.stats.decoder.frames_lost, b.stats.decoder.crc_errors,
                          format_bytes(b.stats.decoder.bytes), b.committed_samples);
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
  app::HostProbeOutcome probe;
  auto outcomes = app::record_boards(request, show, interrupts, &probe);
  if (tty) out << '\n';
  for (const auto& o : outcomes)
    if (!o.not_linked_because.empty()) out << o.not_linked_because << "\n";
  if (request.host_probe)
    out << *request.host_probe << ": run " << probe.run_id << ", " << probe.samples << " samples read by this host, "
        << probe.read_errors << " read errors" << (probe.error.empty() ? std::string() : "; stopped: " + probe.error)
        << (outcomes.empty() || !outcomes.front().run_id ? std::string()
                                                        : "; measures run " + std::to_string(*outcomes.front().run_id))
        << "\n";
  return outcomes;
}

}  // namespace ergon::cli
