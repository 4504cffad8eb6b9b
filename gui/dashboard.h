#pragma once

// `ergon dashboard`: the desktop view of a cost database (Qt 6 Widgets + Qt Charts): Pareto
// fronts of the stored plans, two schedules side by side with their memory over time, a
// run's power trace with its op spans (live while it records), the cost table, and a
// pipeline over several boards (its timeline and energy per board).

#include <cstdint>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gui/model/views.h"

namespace ergon::gui {

struct DashboardOptions {
  std::filesystem::path db = "ergon.db";
  std::optional<int64_t> run;  ///< the run whose power trace to show first (default: the latest)
  bool live = false;           ///< follow the latest run as it records
};

/// Opens the window and runs until it is closed; returns the exit code. Throws Error when the
/// database cannot be opened.
int run_dashboard(int argc, char** argv, const DashboardOptions& options);

class Dashboard;
/// What recording from the Record tab gave.
struct RecordTabResult {
  std::optional<int64_t> run_id;
  std::string outcome;  ///< "completed, run 3: 20 op costs attributed", or the error
  RecordCounters counters;
  std::size_t costs = 0;          ///< op costs shown after attributing
  std::size_t trace_samples = 0;  ///< in the tab's trace
  std::vector<std::string> rails;
};

/// What the Power tab shows: the run selected and how much of its trace is loaded.
struct PowerTabState {
  int64_t run_id = 0;
  std::size_t samples = 0;
  double duration_s = 0;
};

/// The dashboard's window without an event loop of its own (offscreen when there is no
/// display), for embedding and tests: loaded and shown when constructed. Throws Error when
/// the database cannot be opened.
class DashboardWindow {
 public:
  explicit DashboardWindow(const DashboardOptions& options, int width = 1400, int height = 900);
  ~DashboardWindow();
  DashboardWindow(const DashboardWindow&) = delete;
  DashboardWindow& operator=(const DashboardWindow&) = delete;
  /// Runs Qt's events for `seconds` (the live view polls the database once a second).
  void run_events_for(double seconds);
  [[nodiscard]] PowerTabState power() const;
  /// The Pareto tab's x axis as drawn: its title and range.
  [[nodiscard]] std::pair<std::string, std::pair<double, double>> pareto_x_axis() const;
  /// The Power tab's legend: one name per rail shown.
  [[nodiscard]] std::vector<std::string> power_rails() const;
  /// Records from the Record tab as a user would: fills port, board and power mode, presses
  /// Start, and runs Qt's events until the run is recorded and attributed (or `timeout_s`
  /// passes, when it presses Stop).
  RecordTabResult record(const std::string& port, const std::string& board, const std::string& power_mode,
                         double timeout_s = 60);
  /// Bars on the Pipeline tab's timeline (it plans resnet18-cifar on two Pi 4s at start).
  [[nodiscard]] std::size_t pipeline_bars() const;
  /// Grabs each tab to `dir` (pareto.png, schedules.png, power.png, costs.png, pipeline.png,
  /// record.png).
  std::vector<std::filesystem::path> render(const std::filesystem::path& dir);

 private:
  struct App;
  std::unique_ptr<App> app_;
  std::unique_ptr<Dashboard> window_;
};

/// Renders every view of the dashboard to PNG files in `dir` (pareto.png, schedules.png,
/// power.png, costs.png, pipeline.png) at `width` x `height`, without a display (QT_QPA_PLATFORM=offscreen
/// is set when none is). Returns the files written.
std::vector<std::filesystem::path> render_dashboard(const DashboardOptions& options,
                                                    const std::filesystem::path& dir,
                                                    int width = 1400, int height = 900);

}  // namespace ergon::gui
