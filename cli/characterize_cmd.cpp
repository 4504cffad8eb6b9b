// ergon characterize: measure a board against its descriptor, and write its board card.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "app/characterize.h"
#include "cli/options.h"
#include "cli/record_status.h"
#include "common/error.h"
#include "devices/board_file.h"
#include "devices/board_profile.h"
#include "gui/board_card.h"

namespace ergon::cli {
namespace {

struct CharacterizeArgs {
  std::string port;
  std::string board;
  std::string db = "ergon.db";
  std::string modes;
  std::string out;
  uint32_t baud = 115200;
  uint32_t seed = 1;
  bool no_plots = false;
  std::string host_probe;
};

/// "[mode 1/3 2400MHz] recording [#########.........]  45/231 windows" on a terminal,
/// a line per step otherwise.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressLine() { finish(); }

  void show(const app::CharacterizeProgress& p) {
    using Step = app::CharacterizeProgress::Step;
    const std::string head = fmt::format("[mode {}/{} {}]", p.mode_index + 1, p.modes, p.mode);
    std::string line;
    switch (p.step) {
      case Step::kRecording: {
        constexpr int kWidth = 30;
        const int filled = p.windows_total ? static_cast<int>(kWidth * p.windows_done / p.windows_total) : 0;
        line = fmt::format("{} recording [{}{}] {}/{} windows", head, std::string(filled, '#'),
                           std::string(kWidth - filled, '.'), p.windows_done, p.windows_total);
        break;
      }
      case Step::kResumed: line = head + " measured by an earlier run: not run again"; break;
      case Step::kAttributing: line = head + " attributing"; break;
      case Step::kFitting: line = head + " fitting"; break;
    }
    if (tty_) {
      std::cerr << "\r\033[K" << line << std::flush;
      open_ = true;
      if (p.step != Step::kRecording) finish();
    } else if (p.step != Step::kRecording) {
      std::cerr << line << "\n";
      quarter_ = -1;
    } else {
      // Not a terminal (a log): a line at the start and at each quarter of the windows.
      const int quarter = p.windows_total ? static_cast<int>(4 * p.windows_done / p.windows_total) : 0;
      if (quarter > quarter_) std::cerr << line << "\n";
      quarter_ = std::max(quarter_, quarter);
    }
  }
  void finish() {
    if (open_) std::cerr << "\n";
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
  int quarter_ = -1;  ///< the last quarter of a mode's windows logged
};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file.flush()) throw Error("cannot write " + path.string());
}

int run_characterize(const CharacterizeArgs& a) {
  app::CharacterizeRequest request;
  request.port = a.port;
  request.baud = a.baud;
  request.db_path = a.db;
  request.seed = a.seed;
  if (!a.host_probe.empty()) request.host_probe = a.host_probe;
  request.board = devices::board_named(a.board);
  if (a.modes == "all") {
    for (const auto& m : request.board.power_modes) request.modes.push_back(m.name);
  } else {
    std::stringstream list(a.modes);
    for (std::string m; std::getline(list, m, ',');)
      if (!m.empty()) request.modes.push_back(m);
  }
  const std::filesystem::path out = a.out.empty() ? request.board.name + "-card" : a.out;

  app::CharacterizeResult result;
  {
    ProgressLine progress;
    result = app::characterize(request, [&](const app::CharacterizeProgress& p) { progress.show(p); },
                               install_interrupt_counter());
  }
  std::filesystem::create_directories(out);
  std::vector<std::string> plots;
  if (!a.no_plots)
    for (const auto& path : gui::render_board_card_plots(result, out)) plots.push_back(path.filename().string());
  const auto card = out / (request.board.name + ".md");
  const auto descriptor = out / (request.board.name + ".json");
  std::vector<std::string> notes = {fmt::format("Measured by ergon characterize on {} into {}.", a.port, a.db)};
  for (const auto& line : result.not_measured) notes.push_back("Not measured: " + line);
  write_file(card, app::board_card_markdown(result, plots));
  write_file(descriptor, devices::board_descriptor_json(result.measured, notes));

  const auto& m = result.modes.front();
  std::cout << fmt::format("{} characterized in {} mode(s): {:.4g} GFLOP/s, {:.4g} GB/s, {:.3g} us per op",
                           request.board.name, result.modes.size(), m.flops_per_s / 1e9, m.mem_bytes_per_s / 1e9,
                           m.op_overhead_s * 1e6);
  if (m.has_energy) std::cout << fmt::format(", idle {:.4g} W, +{:.4g} W computing", m.idle_w, m.compute_w);
  std::cout << fmt::format("\n  card:       {}\n  descriptor: {}\n", card.string(), descriptor.string());
  for (const auto& p : plots) std::cout << "  plot:       " << (out / p).string() << "\n";
  return 0;
}

}  // namespace

void add_characterize_command(CLI::App& app, Commands& commands) {
  static CharacterizeArgs args;
  auto* c = app.add_subcommand(
      "characterize",
      "measure a board against its descriptor: every op kind over a grid of shapes, paging and idle, in each power "
      "mode; attribute, fit, and write a board card (Markdown + PNG plots) and a descriptor of the measured figures. "
      "Run it again after an unplug: finished modes are not run again");
  c->add_option("--port", args.port, "serial device, pty path or tcp:HOST:PORT")->required();
  c->add_option("--board", args.board, "what the board is believed to be: " + devices::board_names() +
                                           ", or a descriptor file")
      ->required()
      ->transform(board_name_or_file());
  c->add_option("--db", args.db, "database file (runs are kept: a second call resumes)")->capture_default_str();
  c->add_option("--modes", args.modes,
                "all, or a comma-separated list of the board's modes to measure besides its first (default: its "
                "first alone)");
  c->add_option("--out", args.out, "folder for the card, its plots and the measured descriptor (default: NAME-card)");
  c->add_option("--baud", args.baud, "serial rate")->capture_default_str();
  c->add_option("--seed", args.seed, "shuffles the plan")->capture_default_str();
  c->add_flag("--no-plots", args.no_plots, "write the card without its PNG plots");
  c->add_option("--host-probe", args.host_probe,
                "a power monitor this host reads on the board's supply (ppk2:/dev/ttyACM1,vdd=3000, sigrok:...)");
  commands.add(c, [] { return run_characterize(args); });
}

}  // namespace ergon::cli
