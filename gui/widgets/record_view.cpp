#include "gui/widgets/record_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMetaObject>
#include <QPushButton>
#include <QSplitter>
#include <QThreadPool>
#include <QTimer>
#include <QVBoxLayout>

#include "app/attribute.h"
#include "app/record.h"
#include "common/clock.h"
#include "common/error.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/host/discovery.h"

namespace ergon::gui {
namespace {

constexpr const char* kAsItSays = "(as it says)";

}  // namespace

RecordView::RecordView(std::filesystem::path db, QWidget* parent) : QWidget(parent), db_(std::move(db)) {
  auto* layout = new QVBoxLayout(this);
  auto* found_row = new QHBoxLayout;
  found_ = new QComboBox;
  auto* refresh = new QPushButton("Refresh");
  found_row->addWidget(new QLabel("on USB:"));
  found_row->addWidget(found_, 1);
  found_row->addWidget(refresh);
  layout->addLayout(found_row);

  auto* form = new QHBoxLayout;
  port_ = new QComboBox;
  port_->setEditable(true);  // a pty, tcp:HOST:PORT, or a tty discovery did not find
  port_->setMinimumWidth(220);
  board_ = new QComboBox;
  board_->setEditable(true);  // a descriptor file too
  board_->addItem(kAsItSays);
  for (const auto& b : devices::board_profiles()) board_->addItem(QString::fromStdString(b.name));
  mode_ = new QLineEdit;
  mode_->setPlaceholderText("as it runs");
  logger_ = new QLineEdit;
  logger_->setPlaceholderText("none");
  probe_ = new QLineEdit;
  probe_->setPlaceholderText("none (ppk2:/dev/ttyACM1,vdd=3000, sigrok:...)");
  start_button_ = new QPushButton("Start");
  stop_button_ = new QPushButton("Stop");
  stop_button_->setEnabled(false);
  for (QWidget* w : std::initializer_list<QWidget*>{new QLabel("port:"), port_, new QLabel("board:"), board_,
                                                    new QLabel("power mode:"), mode_,
                                                    new QLabel("power logger port:"), logger_,
                                                    new QLabel("probe on this host:"), probe_, start_button_,
                                                    stop_button_})
    form->addWidget(w);
  layout->addLayout(form);
  counters_label_ = new QLabel("not recording");
  layout->addWidget(counters_label_);

  auto* split = new QSplitter(Qt::Vertical);
  trace_ = new PowerView;
  costs_ = new CostView;
  split->addWidget(trace_);
  split->addWidget(costs_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);

  timer_ = new QTimer(this);
  connect(timer_, &QTimer::timeout, this, [this] { poll_trace(); });
  connect(refresh, &QPushButton::clicked, this, [this] { refresh_boards(); });
  connect(found_, &QComboBox::currentIndexChanged, this, [this] {
    const QString tty = found_->currentData().toString();
    if (!tty.isEmpty()) port_->setCurrentText(tty);
    const QString board = found_->currentData(Qt::UserRole + 1).toString();
    if (!board.isEmpty()) board_->setCurrentText(board);
  });
  connect(start_button_, &QPushButton::clicked, this, [this] { start_clicked(); });
  connect(stop_button_, &QPushButton::clicked, this, [this] { stop(); });
  refresh_boards();
}

RecordView::~RecordView() {
  stop();
  QThreadPool::globalInstance()->waitForDone();
}

void RecordView::refresh_boards() {
  const QSignalBlocker block(found_);
  found_->clear();
  try {
    const auto usb = devices::libusb_device_source();
    for (const auto& d : devices::discover_boards(*usb, "/sys")) {
      const QString tty = d.ttys.empty() ? QString() : QString::fromStdString(d.ttys.front());
      found_->addItem(QString::fromStdString(d.what + (d.ttys.empty() ? " (no tty)" : " on " + d.ttys.front())), tty);
      found_->setItemData(found_->count() - 1, QString::fromStdString(d.board), Qt::UserRole + 1);
      if (!tty.isEmpty() && port_->findText(tty) < 0) port_->addItem(tty);
    }
  } catch (const Error& e) {
    found_->addItem(QString("USB not readable: ") + e.what());
  }
  if (found_->count() == 0) found_->addItem("no boards on USB (a simulated one: ergon sim prints its pty)");
}

void RecordView::start(const std::string& port, const std::string& board, const std::string& power_mode) {
  port_->setCurrentText(QString::fromStdString(port));
  board_->setCurrentText(board.empty() ? kAsItSays : QString::fromStdString(board));
  mode_->setText(QString::fromStdString(power_mode));
  start_clicked();
}

void RecordView::stop() {
  if (recording_) interrupts_.fetch_add(1);
}

void RecordView::start_clicked() {
  if (recording_) return;
  app::RecordRequest request;
  const std::string port = port_->currentText().trimmed().toStdString();
  if (port.empty()) {
    counters_label_->setText("choose a port first");
    return;
  }
  request.ports = {port};
  request.db_path = db_;
  try {
    const std::string board = board_->currentText().trimmed().toStdString();
    if (!board.empty() && board != kAsItSays) request.options.expected_board = devices::board_named(board);
  } catch (const Error& e) {
    counters_label_->setText(e.what());
    return;
  }
  request.options.power_mode = mode_->text().trimmed().toStdString();
  if (!logger_->text().trimmed().isEmpty()) request.logger_port = logger_->text().trimmed().toStdString();
  if (!probe_->text().trimmed().isEmpty()) request.host_probe = probe_->text().trimmed().toStdString();

  interrupts_ = 0;
  recording_ = true;
  counters_ = {};
  costs_shown_ = 0;
  outcome_.clear();
  started_ns_ = SteadyClock().now_ns();
  start_button_->setEnabled(false);
  stop_button_->setEnabled(true);
  counters_label_->setText("connecting to " + QString::fromStdString(port));
  timer_->start(1000);
  QThreadPool::globalInstance()->start([this, request] {
    std::optional<int64_t> run_id;
    QString message;
    try {
      const auto outcomes = app::record_boards(
          request,
          [this](std::span<const app::BoardStatus> boards, int64_t now_ns) {
            if (boards.empty()) return;
            const auto& b = boards.front();
            RecordCounters c;
            c.samples = b.stats.samples;
            c.spans = b.stats.spans;
            c.frames_lost = b.stats.decoder.frames_lost;
            c.crc_errors = b.stats.decoder.crc_errors;
            c.committed = b.committed_samples;
            const double seconds = static_cast<double>(now_ns - started_ns_) * 1e-9;
            c.samples_per_s = seconds > 0 ? static_cast<double>(c.samples) / seconds : 0;
            const QString name = QString::fromStdString(b.name);
            QMetaObject::invokeMethod(this, [this, c, name] {
              counters_ = c;
              counters_label_->setText(QString("%1: %2 samples/s, %3 samples, %4 spans, %5 frames lost, %6 CRC errors, "
                                               "%7 committed")
                                           .arg(name)
                                           .arg(c.samples_per_s, 0, 'f', 0)
                                           .arg(c.samples)
                                           .arg(c.spans)
                                           .arg(c.frames_lost)
                                           .arg(c.crc_errors)
                                           .arg(c.committed));
            }, Qt::QueuedConnection);
          },
          interrupts_);
      const auto& o = outcomes.front();
      run_id = o.run_id;
      message = QString::fromUtf8(devices::to_string(o.state).data()) +
                (o.error.empty() ? QString() : QString(": ") + QString::fromStdString(o.error));
      if (run_id) {
        // What `ergon attribute` does, then the run's costs.
        auto db = costdb::Database::open(request.db_path);
        const auto attributed = app::attribute_run(db, *run_id);
        message += QString(", run %1: %2 op costs attributed").arg(*run_id).arg(attributed.rows.size());
      }
    } catch (const std::exception& e) {
      message = e.what();  // whatever it was, the tab must leave "recording"
    } catch (...) {
      message = "recording failed";
    }
    QMetaObject::invokeMethod(this, [this, run_id, message] { finished(run_id, message); }, Qt::QueuedConnection);
  });
}

void RecordView::poll_trace() {
  if (loading_) return;
  try {
    auto db = costdb::Database::open_read_only(db_);
    const auto runs = costdb::list_runs(db);
    if (runs.empty()) return;
    const int64_t id = last_run_ && !recording_ ? *last_run_ : runs.back().id;
    trace_->set_trace(load_power_trace(db, id), QString("run %1 (live)").arg(id));
  } catch (const Error&) {
    // The first commit has not happened yet: the next tick tries again.
  }
}

void RecordView::finished(std::optional<int64_t> run_id, QString message) {
  recording_ = false;
  timer_->stop();
  start_button_->setEnabled(true);
  stop_button_->setEnabled(false);
  last_run_ = run_id;
  outcome_ = message;
  counters_label_->setText(counters_label_->text() + "  |  " + message);
  if (!run_id) return;
  try {
    auto db = costdb::Database::open_read_only(db_);
    trace_->set_trace(load_power_trace(db, *run_id), QString("run %1").arg(*run_id));
    const auto rows = costdb::list_op_costs(db, std::nullopt, *run_id);
    costs_->set_costs(rows);
    costs_shown_ = rows.size();
  } catch (const Error& e) {
    counters_label_->setText(counters_label_->text() + "  |  " + e.what());
  }
  if (on_recorded) on_recorded(*run_id);
}

}  // namespace ergon::gui
