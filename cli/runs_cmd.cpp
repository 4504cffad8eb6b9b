// ergon runs, ergon upgrade, ergon export: what a database holds.

#include "cli/options.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <unistd.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "app/copy_db.h"
#include "app/sigrok_export.h"
#include "common/error.h"
#include "costdb/database.h"

namespace ergon::cli {
namespace {

std::string format_time(int64_t wall_ns) {
  const std::time_t t = static_cast<std::time_t>(wall_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

/// Prints the database's runs, or only those in `only` when it is not empty.
void print_runs(costdb::Database& db, std::ostream& out, const std::vector<int64_t>& only) {
  auto runs = costdb::list_runs(db);
  if (!only.empty()) {
    std::erase_if(runs, [&](const costdb::RunSummary& r) {
      return std::find(only.begin(), only.end(), r.id) == only.end();
    });
  }
  if (runs.empty()) {
    out << "no runs in " << db.path().string() << "\n";
    return;
  }
  out << fmt::format("{:>4}  {:<12} {:<14} {:<13} {:<13} {:<20} {:>8} {:>7} {:>5} {:>6} {:>5}  {}\n",
                     "run", "board", "name", "mode", "status", "started (UTC)", "samples",
                     "spans", "sync", "lost", "crc", "source");
  for (const auto& r : runs) {
    const std::string source =
        r.power_run_id ? fmt::format("{} (power from run {})", r.source, *r.power_run_id) : r.source;
    out << fmt::format("{:>4}  {:<12} {:<14} {:<13} {:<13} {:<20} {:>8} {:>7} {:>5} {:>6} {:>5}  {}\n",
                       r.id, r.board_kind, r.board_name, r.power_mode.empty() ? "-" : r.power_mode,
                       costdb::to_string(r.status),
                       format_time(r.started_at_ns), r.samples, r.spans, r.sync_points,
                       r.counters.frames_lost, r.counters.crc_errors, source);
  }
}


void add_database_commands(CLI::App& app, Commands& commands) {
  static std::string runs_db = "ergon.db";
  auto* runs_cmd = app.add_subcommand("runs", "list the recorded runs");
  runs_cmd->add_option("--db", runs_db, kDbHelp)->capture_default_str();
  static int64_t runs_events = 0;
  runs_cmd->add_option("--events", runs_events, "print this run's event log (warnings, power-mode switches, board logs)");

  static std::string export_db = "ergon.db";
  static int64_t export_run = 0;
  static std::string export_dir;
  static std::string upgrade_db = "ergon.db";
  auto* upgrade_cmd = app.add_subcommand("upgrade", "migrate a database made by an older ergon to this one's schema");
  upgrade_cmd->add_option("--db", upgrade_db, kDbHelp)->required()->check(CLI::Validator(
      [](std::string& value) {
        return costdb::database_exists(value) ? std::string() : "no database " + value;
      },
      "DATABASE"));

  static app::CopyRequest copy;
  auto* copy_cmd = app.add_subcommand(
      "copy", "merge one cost database into another (a laptop's file into the lab's PostgreSQL "
              "database): runs, costs, plans and validations it lacks; running it again copies nothing twice");
  copy_cmd->add_option("--from", copy.from, "the database to copy from (read only): " + std::string(kDbHelp))
      ->required();
  copy_cmd->add_option("--to", copy.to, "the database to copy into (created or upgraded as needed)")->required();

  static std::string export_sigrok_file;
  auto* export_cmd = app.add_subcommand(
      "export", "write a run's raw data as CSV files, or as a sigrok session file for PulseView and sigrok-cli");
  export_cmd->add_option("--db", export_db, kDbHelp)->capture_default_str();
  export_cmd->add_option("--run", export_run, "run id (see ergon runs)")->required();
  auto* csv = export_cmd->add_option("--csv", export_dir, "output folder for CSV files");
  auto* sr = export_cmd->add_option("--sigrok", export_sigrok_file,
                                    "a .sr file: each rail's power, current and voltage as analog channels "
                                    "(RAIL_W, RAIL_A, RAIL_V), the op windows as logic channels");
  csv->excludes(sr);
  commands.add(runs_cmd, [] {
    auto db = costdb::Database::open_read_only(runs_db);
    if (runs_events > 0) {
      if (!costdb::find_run(db, runs_events))
        throw InputError(fmt::format("no run {} in {}", runs_events, runs_db));
      for (const auto& e : costdb::list_events(db, runs_events))
        std::cout << fmt::format("{:<16} {}\n", e.kind, e.text);
      return 0;
    }
    print_runs(db, std::cout);
    return 0;
  });
  commands.add(upgrade_cmd, [] {
    const int before = costdb::Database::file_schema_version(upgrade_db);
    auto db = costdb::Database::open(upgrade_db);
    std::cout << (before == db.schema_version()
                      ? fmt::format("{} is at schema version {} already\n", upgrade_db, before)
                      : fmt::format("{}: schema version {} -> {}\n", upgrade_db, before, db.schema_version()));
    return 0;
  });
  commands.add(copy_cmd, [] {
    const bool live = ::isatty(STDERR_FILENO) != 0;
    const auto counts = app::copy_databases(copy, [live](const costdb::CopyProgress& p) {
      if (!live) return;
      std::cerr << fmt::format("\rrun {}/{}: {}\x1b[K", p.run_index, p.run_count,
                               p.present ? fmt::format("run {} is there already", p.source_run_id)
                                         : fmt::format("copied run {} ({} samples)", p.source_run_id, p.samples))
                << std::flush;
    });
    if (live) std::cerr << "\n";
    std::cout << fmt::format(
        "copied {} runs ({} samples, {} spans), {} plans and {} validations; {} runs and {} plans were there already\n",
        counts.runs_copied, counts.samples, counts.spans, counts.plans_copied, counts.validations_copied,
        counts.runs_present, counts.plans_present);
    return 0;
  });
  commands.add(export_cmd, [] {
    if (export_dir.empty() && export_sigrok_file.empty()) throw InputError("export: --csv FOLDER or --sigrok FILE");
    auto db = costdb::Database::open_read_only(export_db);
    if (!export_sigrok_file.empty()) {
      const auto written = app::export_sigrok(db, export_run, export_sigrok_file);
      std::cout << fmt::format("wrote run {} to {}: {} samples at {} Hz, analog {}, logic {}\n", export_run,
                               export_sigrok_file, written.samples, written.samplerate_hz, fmt::join(written.analog_channels, " "),
                               fmt::join(written.logic_channels, " "));
      return 0;
    }
    costdb::export_run_csv(db, export_run, export_dir);
    std::cout << fmt::format("wrote run {} to {}/ (ops, spans, samples, sync, events .csv)\n",
                             export_run, export_dir);
    return 0;
  });
}

}  // namespace ergon::cli
