#pragma once
// The dashboard's Record tab: the boards on USB (as `ergon boards` finds them), a port, board,
// power mode and power logger to record with, Start and Stop, a live trace with the link's
// counters, and the costs attributed once the run ends. It records and attributes with the
// same app/ calls as `ergon record` and `ergon attribute`.

#include <QWidget>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "gui/widgets/views.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTimer;

namespace ergon::gui {

class RecordView : public QWidget {
 public:
  explicit RecordView(std::filesystem::path db, QWidget* parent = nullptr);
  ~RecordView() override;

  /// Lists the boards on USB again (libusb and /sys).
  void refresh_boards();
  /// Fills the form and starts, as the Start button does.
  void start(const std::string& port, const std::string& board, const std::string& power_mode);
  /// Asks the board to stop (Ctrl-C's path).
  void stop();
  [[nodiscard]] bool recording() const { return recording_; }
  [[nodiscard]] RecordCounters counters() const { return counters_; }
  /// The run recorded last and the op costs attributed from it (after it ended).
  [[nodiscard]] std::optional<int64_t> last_run() const { return last_run_; }
  [[nodiscard]] std::size_t costs_shown() const { return costs_shown_; }
  [[nodiscard]] const QString& outcome() const { return outcome_; }
  [[nodiscard]] const PowerView* trace() const { return trace_; }

  /// Called on the UI thread once a run is recorded and attributed (the window reloads).
  std::function<void(int64_t run_id)> on_recorded;

 private:
  void start_clicked();
  void poll_trace();
  void finished(std::optional<int64_t> run_id, QString message);

  std::filesystem::path db_;
  QComboBox* found_;
  QComboBox* port_;
  QComboBox* board_;
  QLineEdit* mode_;
  QLineEdit* logger_;
  QLineEdit* probe_;
  QPushButton* start_button_;
  QPushButton* stop_button_;
  QLabel* counters_label_;
  PowerView* trace_;
  CostView* costs_;
  QTimer* timer_;
  std::atomic<int> interrupts_{0};
  bool recording_ = false;
  bool loading_ = false;
  RecordCounters counters_;
  int64_t started_ns_ = 0;
  std::optional<int64_t> last_run_;
  std::size_t costs_shown_ = 0;
  QString outcome_;
};

}  // namespace ergon::gui
