#include "gui/dashboard.h"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QHBoxLayout>
#include <QLabel>
#include <QMainWindow>
#include <QMetaObject>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QThread>
#include <QThreadPool>
#include <QTimer>
#include <QVBoxLayout>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "app/pareto.h"
#include "app/pipeline.h"
#include "app/plan.h"
#include "common/error.h"
#include "common/units.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "costdb/plans.h"
#include "devices/board_profile.h"
#include "planner/zoo.h"
#include "gui/model/views.h"
#include "gui/widgets/record_view.h"
#include "gui/widgets/views.h"

namespace ergon::gui {
namespace {

/// A stored plan's schedule with the graph it was made for (rebuilt from its model and
/// board, as `ergon validate --plan` does), or why not.
std::optional<ScheduleCompareView::Side> side_of(const costdb::PlanRow& row, const std::string& db, QString* why) {
  if (row.schedule.empty()) {
    *why = QString("plan %1 has no schedule").arg(row.id);
    return std::nullopt;
  }
  try {
    ScheduleCompareView::Side side;
    side.graph = app::load_graph(app::graph_args_of(row, db));  // the costs it was planned on
    if (app::graph_digest(side.graph) != row.graph_digest) {
      *why = QString("plan %1: its graph cannot be rebuilt (other costs or batch size)").arg(row.id);
      return std::nullopt;
    }
    side.schedule = planner::decode_schedule(row.schedule);
    // Under the total objective the budget covers parameters and optimizer state too.
    side.budget_bytes = row.objective == "total" && row.budget_bytes > side.graph.fixed_bytes
                            ? row.budget_bytes - side.graph.fixed_bytes
                            : row.budget_bytes;
    side.title = QString("plan %1: %2, %3").arg(row.id).arg(QString::fromStdString(row.planner)).arg(
        QString::number(static_cast<double>(row.budget_bytes) / (1 << 20), 'f', 2) + " MiB");
    return side;
  } catch (const Error& e) {
    *why = QString("plan %1: %2").arg(row.id).arg(e.what());
    return std::nullopt;
  }
}

}  // namespace

class Dashboard : public QMainWindow {
 public:
  explicit Dashboard(DashboardOptions options) : options_(std::move(options)) {
    setWindowTitle("Ergon: " + QString::fromStdString(options_.db.string()));
    tabs_ = new QTabWidget;
    setCentralWidget(tabs_);

    auto* pareto_tab = new QWidget;
    auto* ptl = new QVBoxLayout(pareto_tab);
    auto* sweep = new QHBoxLayout;
    model_ = new QComboBox;
    for (const auto& m : planner::zoo_models()) model_->addItem(QString::fromStdString(m.name));
    model_->setEditable(true);  // "mlp:64,32,10" too
    board_ = new QComboBox;
    for (const auto& b : {"pi4", "tx2", "nrf52840", "mkr1000"}) board_->addItem(b);
    planners_ = new QLineEdit("poet,checkmate,paging");
    budgets_ = new QSpinBox;
    budgets_->setRange(2, 100);
    budgets_->setValue(8);
    sweep_button_ = new QPushButton("Sweep");
    cancel_button_ = new QPushButton("Cancel");
    cancel_button_->setEnabled(false);
    progress_ = new QProgressBar;
    for (QWidget* w : std::initializer_list<QWidget*>{new QLabel("model:"), model_, new QLabel("board:"), board_,
                                                      new QLabel("planners:"), planners_, new QLabel("budgets:"),
                                                      budgets_, sweep_button_, cancel_button_, progress_})
      sweep->addWidget(w);
    ptl->addLayout(sweep);
    pareto_ = new ParetoView;
    ptl->addWidget(pareto_, 1);
    tabs_->addTab(pareto_tab, "Pareto");
    connect(sweep_button_, &QPushButton::clicked, this, [this] { start_sweep(); });
    connect(cancel_button_, &QPushButton::clicked, this, [this] { cancel_ = true; });

    auto* schedules = new QWidget;
    auto* sl = new QVBoxLayout(schedules);
    auto* pick = new QHBoxLayout;
    left_plan_ = new QComboBox;
    right_plan_ = new QComboBox;
    pick->addWidget(new QLabel("left:"));
    pick->addWidget(left_plan_, 1);
    pick->addWidget(new QLabel("right:"));
    pick->addWidget(right_plan_, 1);
    sl->addLayout(pick);
    compare_ = new ScheduleCompareView;
    sl->addWidget(compare_, 1);
    tabs_->addTab(schedules, "Schedules");

    auto* power = new QWidget;
    auto* pl = new QVBoxLayout(power);
    auto* runs = new QHBoxLayout;
    run_ = new QComboBox;
    live_ = new QCheckBox("live: follow the latest run");
    runs->addWidget(new QLabel("run:"));
    runs->addWidget(run_, 1);
    runs->addWidget(live_);
    pl->addLayout(runs);
    power_ = new PowerView;
    pl->addWidget(power_, 1);
    tabs_->addTab(power, "Power");

    costs_ = new CostView;
    tabs_->addTab(costs_, "Costs");

    auto* pipeline_tab = new QWidget;
    auto* pipel = new QVBoxLayout(pipeline_tab);
    auto* form = new QHBoxLayout;
    pipe_model_ = new QComboBox;
    for (const auto& m : planner::zoo_models()) pipe_model_->addItem(QString::fromStdString(m.name));
    pipe_model_->setEditable(true);
    pipe_model_->setCurrentText("resnet18-cifar");
    pipe_boards_ = new QLineEdit("pi4,pi4");
    pipe_microbatches_ = new QSpinBox;
    pipe_microbatches_->setRange(1, 256);
    pipe_microbatches_->setValue(4);
    pipe_order_ = new QComboBox;
    pipe_order_->addItems({"1f1b", "gpipe"});
    pipe_throughput_ = new QCheckBox("least time");
    pipe_button_ = new QPushButton("Plan");
    for (QWidget* w : std::initializer_list<QWidget*>{new QLabel("model:"), pipe_model_, new QLabel("boards:"), pipe_boards_,
                                                      new QLabel("micro-batches:"), pipe_microbatches_, pipe_order_,
                                                      pipe_throughput_, pipe_button_})
      form->addWidget(w);
    form->addStretch(1);
    pipel->addLayout(form);
    pipeline_ = new PipelineView;
    pipel->addWidget(pipeline_, 1);
    tabs_->addTab(pipeline_tab, "Pipeline");
    connect(pipe_button_, &QPushButton::clicked, this, [this] { plan_pipeline_async(); });

    record_ = new RecordView(options_.db);
    tabs_->addTab(record_, "Record");
    record_->on_recorded = [this](int64_t) { load(false); };  // the new run in Power and Costs

    pareto_->on_plan = [this](int64_t id) {
      const int i = left_plan_->findData(QVariant::fromValue<qlonglong>(id));
      if (i >= 0) left_plan_->setCurrentIndex(i);
      tabs_->setCurrentIndex(1);
    };
    connect(left_plan_, &QComboBox::currentIndexChanged, this, [this] { show_schedules(); });
    connect(right_plan_, &QComboBox::currentIndexChanged, this, [this] { show_schedules(); });
    connect(run_, &QComboBox::currentIndexChanged, this, [this] { load_trace_async(); });
    live_->setChecked(options_.live);
    timer_ = new QTimer(this);
    connect(timer_, &QTimer::timeout, this, [this] {
      if (live_->isChecked()) reload_runs(true);
    });
    timer_->start(1000);
  }

  /// Loads everything (synchronously; the trace on a worker thread unless `wait`).
  void load(bool wait) {
    auto db = costdb::Database::open_read_only(options_.db);
    plans_ = costdb::list_plans(db);
    update_basis();
    pareto_->set_plans(plans_, basis_);
    const QSignalBlocker b1(left_plan_), b2(right_plan_);
    left_plan_->clear();
    right_plan_->clear();
    for (const auto& p : plans_) {
      if (p.schedule.empty()) continue;
      const QString label = QString("%1: %2 %3 at %4 MiB (%5)")
                                .arg(p.id)
                                .arg(QString::fromStdString(p.model), QString::fromStdString(p.planner))
                                .arg(static_cast<double>(p.budget_bytes) / (1 << 20), 0, 'f', 2)
                                .arg(QString::fromStdString(p.status));
      left_plan_->addItem(label, QVariant::fromValue<qlonglong>(p.id));
      right_plan_->addItem(label, QVariant::fromValue<qlonglong>(p.id));
    }
    // Default: POET at its smallest budget against another planner at the same budget (the
    // most telling comparison), when the database has them.
    int left = 0, right = left_plan_->count() > 1 ? 1 : 0;
    uint64_t smallest = UINT64_MAX;
    std::string latest;  // the graph planned last, as the Pareto view shows
    int64_t latest_ns = -1;
    for (const auto& p : plans_)
      if (!p.schedule.empty() && p.created_at_ns >= latest_ns) latest_ns = p.created_at_ns, latest = p.graph_digest;
    for (int i = 0; i < left_plan_->count(); ++i) {
      const auto& p = plan(left_plan_->itemData(i).toLongLong());
      if (p.planner == "poet" && p.graph_digest == latest && p.budget_bytes < smallest) smallest = p.budget_bytes, left = i;
    }
    int rank = 99;
    for (int i = 0; i < right_plan_->count() && left_plan_->count() > 0; ++i) {
      const auto& p = plan(right_plan_->itemData(i).toLongLong());
      const auto& l = plan(left_plan_->itemData(left).toLongLong());
      const char* order[] = {"checkmate", "paging", "capuchin", "chen", "rotor", "pofo", "store-all"};
      for (int k = 0; k < 7; ++k)
        if (p.planner == order[k] && p.budget_bytes == l.budget_bytes && p.graph_digest == l.graph_digest && k < rank)
          rank = k, right = i;
    }
    left_plan_->setCurrentIndex(left);
    right_plan_->setCurrentIndex(right);
    show_schedules();
    costs_->set_costs(costdb::list_op_costs(db, std::nullopt, std::nullopt, std::nullopt));
    costs_->set_validations(costdb::list_validations(db));
    reload_runs(false);
    if (wait) {
      // A database without runs yet (plans only, or new) has no trace to show.
      if (run_->count() > 0) power_->set_trace(load_power_trace(db, current_run()), run_->currentText());
    } else {
      load_trace_async();
    }
  }

  /// Plans the Pipeline tab's request on this thread (the default one is quick).
  void plan_pipeline_now() {
    try {
      show_pipeline(app::plan_pipeline(pipeline_args()));
    } catch (const Error& e) {
      statusBar()->showMessage(e.what());
    }
  }
  [[nodiscard]] std::size_t pipeline_bars() const { return pipeline_->gantt()->bars(); }

  QTabWidget* tabs() { return tabs_; }
  PowerView* power() { return power_; }
  RecordView* record() { return record_; }
  [[nodiscard]] const ParetoView* pareto() const { return pareto_; }
  [[nodiscard]] const PowerView* power() const { return power_; }
  /// Stops polling the database (before the window goes away).
  void stop_live() { timer_->stop(); }
  [[nodiscard]] PowerTabState power_state() const {
    return {run_->count() > 0 ? current_run() : 0, power_->samples(), power_->duration_s()};
  }

 private:
  const costdb::PlanRow& plan(int64_t id) const {
    for (const auto& p : plans_)
      if (p.id == id) return p;
    throw InputError("no plan " + std::to_string(id));
  }

  int64_t current_run() const { return run_->currentData().toLongLong(); }

  /// Each plotted graph's fixed bytes and store-all activations (its graph rebuilt once, as
  /// the Schedules tab does), so the Pareto tab plots activations as % of store-all.
  void update_basis() {
    for (const auto& row : plans_) {
      if (row.schedule.empty() || basis_.count(row.graph_digest) || unbuildable_.count(row.graph_digest)) continue;
      try {
        const auto graph = app::load_graph(app::graph_args_of(row, options_.db.string()));
        if (app::graph_digest(graph) != row.graph_digest) throw Error("other costs");
        basis_[row.graph_digest] = {graph.fixed_bytes, graph.store_all_peak_bytes()};
      } catch (const Error&) {
        unbuildable_.insert(row.graph_digest);  // plotted as activation MiB instead
      }
    }
  }

  /// The Pareto tab only, from the database as it is now (a sweep commits each plan).
  void reload_plans() {
    try {
      auto db = costdb::Database::open_read_only(options_.db);
      plans_ = costdb::list_plans(db);
      update_basis();
      pareto_->set_plans(plans_, basis_);
    } catch (const Error& e) {
      statusBar()->showMessage(e.what());
    }
  }

  /// A Pareto sweep of the chosen model and board on a worker thread, each plan stored as it
  /// is found (ergon pareto's code); progress as plans arrive; Cancel lets the running
  /// solves finish and starts no more.
  void start_sweep() {
    app::ParetoArgs args;
    args.plan.model = model_->currentText().toStdString();
    args.plan.board = board_->currentText().toStdString();
    args.plan.time_limit_s = 10;
    args.planners = planners_->text().toStdString();
    args.budgets = budgets_->value();
    args.db = options_.db.string();
    args.cancel = &cancel_;
    cancel_ = false;
    sweep_button_->setEnabled(false);
    cancel_button_->setEnabled(true);
    progress_->setRange(0, 0);  // busy until the first point says how many
    statusBar()->showMessage("sweeping " + model_->currentText() + " on " + board_->currentText());
    QThreadPool::globalInstance()->start([this, args]() mutable {
      args.on_point = [this](std::size_t done, std::size_t total) {
        QMetaObject::invokeMethod(this, [this, done, total] {
          progress_->setRange(0, static_cast<int>(total));
          progress_->setValue(static_cast<int>(done));
          reload_plans();  // each point shows as it is solved
        }, Qt::QueuedConnection);
      };
      QString message;
      try {
        const auto points = app::pareto_sweep(args);
        message = QString("%1 plans%2").arg(points.size()).arg(cancel_ ? " (canceled)" : "");
      } catch (const Error& e) {
        message = e.what();
      }
      QMetaObject::invokeMethod(this, [this, message] {
        sweep_button_->setEnabled(true);
        cancel_button_->setEnabled(false);
        progress_->setRange(0, 1);
        progress_->setValue(1);
        statusBar()->showMessage(message);
        load(false);
      }, Qt::QueuedConnection);
    });
  }

  app::PipelineArgs pipeline_args() const {
    app::PipelineArgs args;
    args.model = pipe_model_->currentText().toStdString();
    const QStringList boards = pipe_boards_->text().split(',', Qt::SkipEmptyParts);
    for (const QString& b : boards) args.boards.push_back(b.trimmed().toStdString());
    args.microbatches = pipe_microbatches_->value();
    args.order = pipe_order_->currentText().toStdString();
    args.throughput = pipe_throughput_->isChecked();
    args.time_limit_s = 30;
    return args;
  }

  /// Plans on a worker thread (ergon pipeline's code), then draws the result.
  void plan_pipeline_async() {
    const app::PipelineArgs args = pipeline_args();
    pipe_button_->setEnabled(false);
    statusBar()->showMessage("planning a pipeline of " + pipe_model_->currentText());
    QThreadPool::globalInstance()->start([this, args] {
      auto outcome = std::make_shared<std::optional<app::PipelineOutcome>>();
      QString error;
      try {
        *outcome = app::plan_pipeline(args);
      } catch (const Error& e) {
        error = e.what();
      }
      QMetaObject::invokeMethod(this, [this, outcome, error] {
        pipe_button_->setEnabled(true);
        if (!error.isEmpty()) return statusBar()->showMessage(error);
        show_pipeline(**outcome);
        statusBar()->showMessage("planned");
      }, Qt::QueuedConnection);
    });
  }

  void show_pipeline(const app::PipelineOutcome& o) {
    std::vector<std::string> boards, links;
    std::vector<PipelineView::Board> energy;
    const auto& p = o.prediction;
    for (std::size_t s = 0; s < o.stages.size(); ++s) {
      const auto& st = o.stages[s];
      boards.push_back(fmt::format("{} {}: ops {}..{}", s, st.board, st.first_op, st.end_op - 1));
      energy.push_back({QString::fromStdString(fmt::format("{} {}", s, st.board)),
                        o.microbatches * p.stages[s].dynamic_j, st.idle_w * p.makespan_s});
    }
    for (const auto& l : o.links) links.push_back(fmt::format("{} ({})", l.kind, format_bytes(l.bytes)));
    QString summary = QString::fromStdString(fmt::format(
        "<b>{}</b>, {} micro-batches, {}: <b>{:.4g} s</b> and <b>{}{:.4g} J</b> per batch", o.model, o.microbatches,
        o.order, p.makespan_s, o.missing_link_energy.empty() ? "" : "&ge; ", p.energy_j()));
    for (std::size_t s = 0; s < o.stages.size(); ++s) {
      const auto& st = o.stages[s];
      summary += QString::fromStdString(fmt::format(
          "<br>stage {} on {}: {} .. {}, {}, {} of {} ({} in flight), idle {:.0f} %", s, st.board, st.first_name,
          st.last_name, st.planner, format_bytes(st.memory_bytes), format_bytes(st.budget_bytes), st.in_flight,
          100 * p.timeline.bubble_fraction(static_cast<int>(s))));
    }
    for (const auto& m : o.missing_link_energy)
      summary += QString::fromStdString("<br><i>" + m + ": left out of the energy</i>");
    pipeline_->set_pipeline(pipeline_gantt(p.timeline, boards, links), energy, p.link_j, summary);
  }

  void show_schedules() {
    QString why_left, why_right;
    std::optional<ScheduleCompareView::Side> l, r;
    if (left_plan_->count() > 0) l = side_of(plan(left_plan_->currentData().toLongLong()), options_.db.string(), &why_left);
    if (right_plan_->count() > 0)
      r = side_of(plan(right_plan_->currentData().toLongLong()), options_.db.string(), &why_right);
    compare_->set_schedules(l, r);
    const QString why = why_left.isEmpty() ? why_right : why_left;
    statusBar()->showMessage(why.isEmpty() && left_plan_->count() == 0 ? "no plans with schedules (ergon pareto)" : why);
  }

  void reload_runs(bool follow_latest) {
    auto db = costdb::Database::open_read_only(options_.db);
    const auto runs = costdb::list_runs(db);
    const int64_t keep = run_->count() > 0 ? current_run() : options_.run.value_or(-1);
    const QSignalBlocker block(run_);
    run_->clear();
    int select = -1;
    for (const auto& r : runs) {
      run_->addItem(QString("%1: %2 (%3), %4 samples")
                        .arg(r.id)
                        .arg(QString::fromStdString(r.board_name), QString::fromUtf8(costdb::to_string(r.status).data()))
                        .arg(r.samples),
                    QVariant::fromValue<qlonglong>(r.id));
      if (r.id == keep) select = run_->count() - 1;
    }
    if (follow_latest || select < 0) select = run_->count() - 1;
    run_->setCurrentIndex(select);
    if (follow_latest) load_trace_async();
  }

  /// Reads the run off the UI thread (its own read-only connection), then draws it.
  void load_trace_async() {
    if (run_->count() == 0 || loading_) return;
    loading_ = true;
    const int64_t id = current_run();
    const QString title = run_->currentText();
    const std::filesystem::path path = options_.db;
    QThreadPool::globalInstance()->start([this, id, title, path] {
      auto trace = std::make_shared<PowerTrace>();
      QString error;
      try {
        auto db = costdb::Database::open_read_only(path);
        *trace = load_power_trace(db, id);
      } catch (const Error& e) {
        error = e.what();
      }
      QMetaObject::invokeMethod(this, [this, trace, title, error] {
        loading_ = false;
        if (!error.isEmpty()) return statusBar()->showMessage(error);
        power_->set_trace(std::move(*trace), title);
      }, Qt::QueuedConnection);
    });
  }

  DashboardOptions options_;
  std::vector<costdb::PlanRow> plans_;
  std::map<std::string, MemoryBasis> basis_;  ///< by graph digest
  std::set<std::string> unbuildable_;         ///< digests whose graph cannot be rebuilt
  QTabWidget* tabs_;
  ParetoView* pareto_;
  QComboBox *left_plan_, *right_plan_, *run_;
  QCheckBox* live_;
  ScheduleCompareView* compare_;
  PowerView* power_;
  CostView* costs_;
  RecordView* record_;
  QTimer* timer_;
  bool loading_ = false;
  QComboBox *model_, *board_;
  QLineEdit* planners_;
  QSpinBox* budgets_;
  QPushButton *sweep_button_, *cancel_button_;
  QProgressBar* progress_;
  std::atomic<bool> cancel_{false};
  QComboBox *pipe_model_, *pipe_order_;
  QLineEdit* pipe_boards_;
  QSpinBox* pipe_microbatches_;
  QCheckBox* pipe_throughput_;
  QPushButton* pipe_button_;
  PipelineView* pipeline_;
};

int run_dashboard(int argc, char** argv, const DashboardOptions& options) {
  QApplication app(argc, argv);
  Dashboard window(options);
  window.load(false);
  window.plan_pipeline_now();
  window.resize(1400, 900);
  window.show();
  return QApplication::exec();
}

struct DashboardWindow::App {
  std::unique_ptr<QApplication> owned;  ///< null when the process has an application already
};

DashboardWindow::DashboardWindow(const DashboardOptions& options, int width, int height) : app_(new App) {
  if (std::getenv("DISPLAY") == nullptr && std::getenv("WAYLAND_DISPLAY") == nullptr)
    ::setenv("QT_QPA_PLATFORM", "offscreen", 0);
  static int argc = 1;
  static char arg0[] = "ergon";
  static char* argv[] = {arg0, nullptr};
  if (QApplication::instance() == nullptr) app_->owned = std::make_unique<QApplication>(argc, argv);
  window_ = std::make_unique<Dashboard>(options);
  window_->resize(width, height);
  window_->load(true);
  window_->plan_pipeline_now();
  window_->show();
}

DashboardWindow::~DashboardWindow() {
  // No new polls; a trace still loading posts its result to the window: let it land first.
  window_->stop_live();
  QThreadPool::globalInstance()->waitForDone();
  QApplication::processEvents();
  window_.reset();
}

void DashboardWindow::run_events_for(double seconds) {
  QElapsedTimer timer;
  timer.start();
  while (static_cast<double>(timer.elapsed()) < seconds * 1e3) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(5);
  }
}

PowerTabState DashboardWindow::power() const { return window_->power_state(); }
std::pair<std::string, std::pair<double, double>> DashboardWindow::pareto_x_axis() const {
  return {window_->pareto()->x_title().toStdString(), window_->pareto()->x_range()};
}
std::vector<std::string> DashboardWindow::power_rails() const { return window_->power()->rail_names(); }

RecordTabResult DashboardWindow::record(const std::string& port, const std::string& board,
                                        const std::string& power_mode, double timeout_s) {
  window_->tabs()->setCurrentWidget(window_->record());
  window_->record()->start(port, board, power_mode);
  QElapsedTimer timer;
  timer.start();
  while (window_->record()->recording() && static_cast<double>(timer.elapsed()) < timeout_s * 1e3) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(5);
  }
  if (window_->record()->recording()) window_->record()->stop();
  while (window_->record()->recording()) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(5);
  }
  QApplication::processEvents();
  const RecordView* r = window_->record();
  return {.run_id = r->last_run(),
          .outcome = r->outcome().toStdString(),
          .counters = r->counters(),
          .costs = r->costs_shown(),
          .trace_samples = r->trace()->samples(),
          .rails = r->trace()->rail_names()};
}
std::size_t DashboardWindow::pipeline_bars() const { return window_->pipeline_bars(); }

std::vector<std::filesystem::path> DashboardWindow::render(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> out;
  const char* names[] = {"pareto.png", "schedules.png", "power.png", "costs.png", "pipeline.png", "record.png"};
  for (int i = 0; i < window_->tabs()->count(); ++i) {
    window_->tabs()->setCurrentIndex(i);
    for (int k = 0; k < 5; ++k) QApplication::processEvents();
    if (i == 2) window_->power()->rebuild();  // decimate for the laid-out width
    QApplication::processEvents();
    const auto path = dir / names[i];
    if (!window_->grab().save(QString::fromStdString(path.string())))
      throw Error("cannot write " + path.string());
    out.push_back(path);
  }
  return out;
}

std::vector<std::filesystem::path> render_dashboard(const DashboardOptions& options, const std::filesystem::path& dir,
                                                    int width, int height) {
  DashboardWindow window(options, width, height);
  return window.render(dir);
}

}  // namespace ergon::gui
