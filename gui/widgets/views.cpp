#include "gui/widgets/views.h"

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QHorizontalStackedBarSeries>
#include <QChart>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QScatterSeries>
#include <QSplitter>
#include <QTableWidget>
#include <QValueAxis>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

#include "common/units.h"
#include "profiler/op.h"

namespace ergon::gui {
namespace {

QColor cell_color(Cell c) {
  switch (c) {
    case Cell::kCompute: return {46, 139, 87};
    case Cell::kRecompute: return {230, 145, 56};
    case Cell::kPageIn: return {52, 101, 164};
    case Cell::kPageOut: return {117, 80, 123};
    case Cell::kResident: return {211, 215, 207};
    case Cell::kOnStorage: return {173, 200, 230};
    case Cell::kEmpty: return Qt::white;
  }
  return Qt::white;
}

QColor phase_color(profiler::Phase p) {
  switch (p) {
    case profiler::Phase::kForward: return {46, 139, 87, 60};
    case profiler::Phase::kBackward: return {204, 0, 0, 60};
    case profiler::Phase::kRecompute: return {230, 145, 56, 60};
    case profiler::Phase::kPageIn:
    case profiler::Phase::kPageOut: return {52, 101, 164, 60};
    default: return {136, 138, 133, 40};
  }
}

QString bytes_text(uint64_t bytes) { return QString::fromStdString(format_bytes(bytes)); }

}  // namespace

// ---- Pareto ----

ParetoView::ParetoView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel("deadline at most (s, 0 = any):"));
  deadline_ = new QDoubleSpinBox;
  deadline_->setRange(0, 1e6);
  deadline_->setDecimals(3);
  controls->addWidget(deadline_);
  note_ = new QLabel;
  controls->addWidget(note_, 1);
  layout->addLayout(controls);
  view_ = new QChartView(new QChart);
  view_->setRenderHint(QPainter::Antialiasing);
  layout->addWidget(view_, 1);
  connect(deadline_, &QDoubleSpinBox::valueChanged, this, [this] { rebuild(); });
}

void ParetoView::set_plans(std::vector<costdb::PlanRow> plans, std::map<std::string, MemoryBasis> basis) {
  plans_ = std::move(plans);
  basis_ = std::move(basis);
  rebuild();
}

void ParetoView::rebuild() {
  auto* chart = new QChart;
  chart->setTitle("Energy per iteration against the memory budget (click a point for its schedule)");
  const std::optional<double> deadline =
      deadline_->value() > 0 ? std::optional<double>(deadline_->value()) : std::nullopt;
  const auto series = pareto_series(plans_, {}, deadline, basis_);
  // The budgets differ by their activations, which may be a sliver of what parameters and
  // optimizer state take: plot the activations, as % of store-all's where the graph is known.
  bool percent = !series.empty();
  for (const ParetoSeries& s : series)
    for (const ParetoPoint& p : s.points) percent = percent && p.percent_of_store_all.has_value();
  const auto x_of = [percent](const ParetoPoint& p) {
    return percent ? *p.percent_of_store_all : static_cast<double>(p.activation_bytes) / (1 << 20);
  };
  auto* x = new QValueAxis;
  x_title_ = percent ? "activation memory budget (% of store-all's activations)"
                     : "activation memory budget (MiB)";
  x->setTitleText(x_title_);
  auto* y = new QValueAxis;
  y->setTitleText("energy (J)");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  double xmin = 1e300, xmax = 0, ymin = 1e300, ymax = 0;
  int points = 0;
  for (const ParetoSeries& s : series) {
    auto* front = new QLineSeries;
    auto* all = new QScatterSeries;
    front->setName(QString::fromStdString(s.planner));
    all->setMarkerSize(9);
    std::vector<int64_t> ids;
    for (const ParetoPoint& p : s.points) {
      const double mb = x_of(p);
      all->append(mb, p.energy_j);
      ids.push_back(p.plan_id);
      if (p.on_front) front->append(mb, p.energy_j);
      xmin = std::min(xmin, mb);
      xmax = std::max(xmax, mb);
      ymin = std::min(ymin, p.energy_j);
      ymax = std::max(ymax, p.energy_j);
      ++points;
    }
    chart->addSeries(front);
    chart->addSeries(all);
    all->setColor(front->color());
    for (QAbstractSeries* a : {static_cast<QAbstractSeries*>(front), static_cast<QAbstractSeries*>(all)}) {
      a->attachAxis(x);
      a->attachAxis(y);
    }
    chart->legend()->markers(all).front()->setVisible(false);
    connect(all, &QScatterSeries::clicked, this, [this, all, ids](const QPointF& pt) {
      // The nearest point of this series.
      int best = -1;
      double best_d = 1e300;
      for (int i = 0; i < all->count(); ++i) {
        const double d = std::hypot(all->at(i).x() - pt.x(), all->at(i).y() - pt.y());
        if (d < best_d) best_d = d, best = i;
      }
      if (best >= 0 && on_plan) on_plan(ids[static_cast<std::size_t>(best)]);
    });
  }
  // The fronts fill the plot: a margin of a twentieth of their span around them.
  const auto range = [](QValueAxis* axis, double lo, double hi) {
    if (!(hi >= lo)) lo = 0, hi = 1;
    const double pad = hi > lo ? (hi - lo) / 20 : std::max(std::abs(hi) / 20, 1e-9);
    axis->setRange(lo - pad, hi + pad);
  };
  range(x, xmin, xmax);
  range(y, ymin, ymax);
  // Round ticks: 0, 20, 40 % rather than 69.3859 MiB.
  x->applyNiceNumbers();
  y->applyNiceNumbers();
  x_range_ = {x->min(), x->max()};
  note_->setText(points == 0 ? "no plans with schedules in this database (ergon pareto makes them)"
                             : QString("%1 plans, %2 planners").arg(points).arg(series.size()));
  QChart* old = view_->chart();
  view_->setChart(chart);
  delete old;
}

// ---- Schedules ----

ScheduleGridView::ScheduleGridView(QWidget* parent) : QWidget(parent) { setMinimumSize(200, 200); }

void ScheduleGridView::set_grid(ScheduleGrid grid, QString title) {
  grid_ = std::move(grid);
  title_ = std::move(title);
  update();
}

void ScheduleGridView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  p.drawText(QRect(0, 0, width(), 20), Qt::AlignCenter, title_);
  if (grid_.nodes == 0) return;
  const QRectF area(40, 24, width() - 48, height() - 64);
  const double cw = area.width() / grid_.nodes, ch = area.height() / grid_.stages;
  for (int t = 0; t < grid_.stages; ++t)
    for (int j = 0; j < grid_.nodes; ++j) {
      const Cell c = grid_.at(t, j);
      if (c == Cell::kEmpty) continue;
      p.fillRect(QRectF(area.left() + j * cw, area.top() + t * ch, std::max(cw, 1.0), std::max(ch, 1.0)),
                 cell_color(c));
    }
  p.setPen(Qt::gray);
  p.drawRect(area);
  p.setPen(Qt::black);
  p.drawText(QRectF(0, area.top(), 38, 20), Qt::AlignRight, "stage");
  p.drawText(QRectF(area.left(), area.bottom() + 2, area.width(), 16), Qt::AlignCenter, "node");
  // Legend.
  const std::pair<Cell, const char*> legend[] = {{Cell::kCompute, "compute"}, {Cell::kRecompute, "recompute"},
                                                 {Cell::kPageOut, "page out"}, {Cell::kPageIn, "page in"},
                                                 {Cell::kResident, "in RAM"}, {Cell::kOnStorage, "on storage"}};
  double lx = area.left();
  for (const auto& [c, name] : legend) {
    p.fillRect(QRectF(lx, height() - 18, 12, 12), cell_color(c));
    p.drawText(QPointF(lx + 16, height() - 8), name);
    lx += 90;
  }
}

ScheduleCompareView::ScheduleCompareView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* grids = new QSplitter;
  left_ = new ScheduleGridView;
  right_ = new ScheduleGridView;
  grids->addWidget(left_);
  grids->addWidget(right_);
  layout->addWidget(grids, 3);
  totals_ = new QLabel;
  totals_->setTextFormat(Qt::RichText);
  layout->addWidget(totals_);
  memory_ = new QChartView(new QChart);
  layout->addWidget(memory_, 2);
}

void ScheduleCompareView::set_schedules(const std::optional<Side>& left, const std::optional<Side>& right) {
  auto* chart = new QChart;
  chart->setTitle("Activation memory over the steps, against the budget");
  auto* x = new QValueAxis;
  x->setTitleText("step");
  auto* y = new QValueAxis;
  y->setTitleText("MiB");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  QString rows = "<table cellspacing=8><tr><th></th><th>energy (J)</th><th>time (s)</th><th>peak</th>"
                 "<th>recomputations</th><th>page-ins</th><th>page-outs</th></tr>";
  std::optional<ScheduleTotals> totals[2];
  double xmax = 1, ymax = 0;
  int k = 0;
  for (const auto* side : {&left, &right}) {
    ScheduleGridView* grid = k == 0 ? left_ : right_;
    if (!*side) {
      grid->set_grid({}, "(no schedule)");
      ++k;
      continue;
    }
    const Side& s = **side;
    grid->set_grid(schedule_grid(s.graph, s.schedule), s.title);
    const ScheduleTotals t = schedule_totals(s.graph, s.schedule);
    totals[k] = t;
    rows += QString("<tr><td><b>%1</b></td><td>%2</td><td>%3</td><td>%4</td><td>%5</td><td>%6</td><td>%7</td></tr>")
                .arg(s.title)
                .arg(t.energy_j, 0, 'g', 6)
                .arg(t.time_s, 0, 'g', 6)
                .arg(bytes_text(t.peak_bytes))
                .arg(t.recomputes)
                .arg(t.page_ins)
                .arg(t.page_outs);
    auto* line = new QLineSeries;
    line->setName(s.title);
    const auto mem = memory_timeline(s.graph, s.schedule);
    for (std::size_t i = 0; i < mem.size(); ++i) {
      line->append(static_cast<double>(i), static_cast<double>(mem[i]) / (1 << 20));
      ymax = std::max(ymax, static_cast<double>(mem[i]) / (1 << 20));
    }
    xmax = std::max(xmax, static_cast<double>(mem.size()));
    chart->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
    if (s.budget_bytes > 0) {
      auto* budget = new QLineSeries;
      budget->setName(s.title + " budget");
      const double b = static_cast<double>(s.budget_bytes) / (1 << 20);
      budget->append(0, b);
      budget->append(static_cast<double>(mem.size()), b);
      QPen pen(line->color());
      pen.setStyle(Qt::DashLine);
      budget->setPen(pen);
      chart->addSeries(budget);
      budget->attachAxis(x);
      budget->attachAxis(y);
      ymax = std::max(ymax, b);
    }
    ++k;
  }
  if (totals[0] && totals[1]) {
    const auto pct = [](double a, double b) { return b > 0 ? 100 * (a / b - 1) : 0.0; };
    rows += QString("<tr><td><b>right vs left</b></td><td>%1 %</td><td>%2 %</td><td>%3 %</td><td></td><td></td><td></td></tr>")
                .arg(pct(totals[1]->energy_j, totals[0]->energy_j), 0, 'f', 2)
                .arg(pct(totals[1]->time_s, totals[0]->time_s), 0, 'f', 2)
                .arg(pct(static_cast<double>(totals[1]->peak_bytes), static_cast<double>(totals[0]->peak_bytes)), 0, 'f', 2);
  }
  totals_->setText(rows + "</table>");
  x->setRange(0, xmax);
  y->setRange(0, ymax > 0 ? ymax * 1.1 : 1);
  QChart* old = memory_->chart();
  memory_->setChart(chart);
  delete old;
}

// ---- Power ----

PowerView::PowerView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  view_ = new QChartView(new QChart);
  view_->setRubberBand(QChartView::HorizontalRubberBand);
  layout->addWidget(view_);
}

void PowerView::set_trace(PowerTrace trace, QString title) {
  trace_ = std::move(trace);
  auto* chart = new QChart;
  chart->setTitle(title);
  x_ = new QValueAxis;
  x_->setTitleText("time (s)");
  y_ = new QValueAxis;
  y_->setTitleText("power (W)");
  chart->addAxis(x_, Qt::AlignBottom);
  chart->addAxis(y_, Qt::AlignLeft);
  double ymax = 0;
  for (const auto& [rail, ys] : trace_.power_w)
    for (double v : ys) ymax = std::max(ymax, v);
  x_->setRange(0, trace_.duration_s > 0 ? trace_.duration_s : 1);
  y_->setRange(0, ymax > 0 ? ymax * 1.1 : 1);
  QChart* old = view_->chart();
  view_->setChart(chart);
  delete old;
  connect(x_, &QValueAxis::rangeChanged, this, [this] { rebuild(); });
  rebuild();
}

void PowerView::rebuild() {
  if (rebuilding_ || x_ == nullptr) return;
  rebuilding_ = true;
  QChart* chart = view_->chart();
  for (QAbstractSeries* s : chart->series()) {
    chart->removeSeries(s);
    delete s;
  }
  const double x0 = x_->min(), x1 = x_->max();
  const auto pixels = static_cast<std::size_t>(std::max(100.0, chart->plotArea().width()));
  points_drawn_ = 0;
  // Op spans as bands, one area series per phase, merged below a pixel.
  std::map<profiler::Phase, QLineSeries*> uppers;
  const double top = y_->max(), min_width = (x1 - x0) / static_cast<double>(pixels);
  for (const Band& b : trace_.bands) {
    if (b.end_s < x0 || b.begin_s > x1) continue;
    QLineSeries*& upper = uppers[b.phase];
    if (upper == nullptr) upper = new QLineSeries;
    const double end = std::max(b.end_s, b.begin_s + min_width);
    if (upper->count() > 0 && upper->at(upper->count() - 1).x() >= b.begin_s) {
      upper->replace(upper->count() - 1, QPointF(std::max(end, upper->at(upper->count() - 1).x()), 0));
      upper->replace(upper->count() - 2, QPointF(std::max(end, upper->at(upper->count() - 2).x()), top));
      continue;
    }
    upper->append(b.begin_s, 0);
    upper->append(b.begin_s, top);
    upper->append(end, top);
    upper->append(end, 0);
  }
  for (auto& [phase, upper] : uppers) {
    auto* area = new QAreaSeries(upper);
    area->setName(QString::fromUtf8(profiler::to_string(phase).data()));
    area->setColor(phase_color(phase));
    area->setBorderColor(Qt::transparent);
    chart->addSeries(area);
    area->attachAxis(x_);
    area->attachAxis(y_);
  }
  for (const auto& [rail, xs] : trace_.t_s) {
    const auto& ys = trace_.power_w.at(rail);
    const auto pts = decimated_polyline(xs, ys, x0, x1, pixels);
    QList<QPointF> list;
    list.reserve(static_cast<qsizetype>(pts.size()));
    for (const Point& p : pts) list.append(QPointF(p.x, p.y));
    auto* line = new QLineSeries;
    const auto name = trace_.rail_names.find(rail);
    line->setName(name != trace_.rail_names.end() ? QString::fromStdString(name->second) : QString("rail %1").arg(rail));
    line->replace(list);
    chart->addSeries(line);
    line->attachAxis(x_);
    line->attachAxis(y_);
    points_drawn_ += pts.size();
  }
  rebuilding_ = false;
}

// ---- Costs ----

CostView::CostView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  table_ = new QTableWidget;
  layout->addWidget(table_, 3);
  auto* charts = new QVBoxLayout;
  scatter_ = new QChartView(new QChart);
  validations_ = new QChartView(new QChart);
  charts->addWidget(scatter_);
  charts->addWidget(validations_);
  layout->addLayout(charts, 2);
}

void CostView::set_validations(const std::vector<costdb::ValidationRow>& rows) {
  auto* chart = new QChart;
  chart->setTitle(QString("Predicted against measured energy (%1 validations)").arg(rows.size()));
  auto* points = new QScatterSeries;
  points->setName("validated plans");
  points->setMarkerSize(9);
  double hi = 0;
  for (const auto& v : rows) {
    if (!v.predicted_energy_j || !v.measured_energy_j) continue;
    points->append(*v.predicted_energy_j, *v.measured_energy_j);
    hi = std::max({hi, *v.predicted_energy_j, *v.measured_energy_j});
  }
  auto* same = new QLineSeries;
  same->setName("measured = predicted");
  same->append(0, 0);
  same->append(hi > 0 ? hi * 1.1 : 1, hi > 0 ? hi * 1.1 : 1);
  auto* x = new QValueAxis;
  x->setTitleText("predicted (J)");
  auto* y = new QValueAxis;
  y->setTitleText("measured (J)");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(same), static_cast<QAbstractSeries*>(points)}) {
    chart->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
  x->setRange(0, hi > 0 ? hi * 1.1 : 1);
  y->setRange(0, hi > 0 ? hi * 1.1 : 1);
  QChart* old = validations_->chart();
  validations_->setChart(chart);
  delete old;
}

void CostView::set_costs(const std::vector<costdb::OpCostRow>& rows) {
  const QStringList headers{"run", "board", "op", "phase", "kind", "dims", "time/rep (s)", "+- (s)",
                            "net J/rep", "+- J", "samples"};
  table_->clear();
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(static_cast<int>(rows.size()));
  auto* chart = new QChart;
  chart->setTitle("Net energy per repetition against FLOPs");
  std::map<std::string, QScatterSeries*> by_kind;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const QStringList cells{QString::number(r.run_id), QString::fromStdString(r.board_kind),
                            QString::number(r.op_id), QString::fromUtf8(profiler::to_string(r.phase).data()),
                            QString::fromStdString(r.op_kind), QString::fromStdString(r.dims),
                            QString::number(r.time_s, 'g', 4),
                            r.time_s_stddev ? QString::number(*r.time_s_stddev, 'g', 2) : "",
                            r.net_energy_j ? QString::number(*r.net_energy_j, 'g', 4) : "unknown",
                            r.energy_j_stddev ? QString::number(*r.energy_j_stddev, 'g', 2) : "",
                            QString::number(r.sample_count)};
    for (int c = 0; c < cells.size(); ++c) table_->setItem(static_cast<int>(i), c, new QTableWidgetItem(cells[c]));
    if (r.flops > 0 && r.net_energy_j.value_or(0) > 0) {
      QScatterSeries*& s = by_kind[r.op_kind];
      if (s == nullptr) {
        s = new QScatterSeries;
        s->setName(QString::fromStdString(r.op_kind));
        s->setMarkerSize(8);
      }
      s->append(static_cast<double>(r.flops), *r.net_energy_j);
    }
  }
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* x = new QLogValueAxis;
  x->setTitleText("FLOPs");
  x->setLabelFormat("%.0e");
  auto* y = new QLogValueAxis;
  y->setTitleText("net energy (J)");
  y->setLabelFormat("%.0e");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (auto& [kind, s] : by_kind) {
    chart->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
  QChart* old = scatter_->chart();
  scatter_->setChart(chart);
  delete old;
}

// ---- Pipelines ----

GanttView::GanttView(QWidget* parent) : QWidget(parent) { setMinimumHeight(220); }

void GanttView::set_gantt(Gantt gantt, QString title) {
  gantt_ = std::move(gantt);
  title_ = std::move(title);
  update();
}

void GanttView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  p.drawText(QRect(0, 0, width(), 20), Qt::AlignCenter, title_);
  if (gantt_.lanes.empty() || gantt_.makespan_s <= 0) return;
  const double label_w = 150;
  const QRectF area(label_w, 24, width() - label_w - 12, height() - 64);
  const double lane_h = area.height() / static_cast<double>(gantt_.lanes.size());
  const double x_per_s = area.width() / gantt_.makespan_s;
  using Kind = planner::PipelineTask::Kind;
  auto color = [](Kind k, int microbatch) {
    const QColor base = k == Kind::kForward    ? QColor(46, 139, 87)
                        : k == Kind::kBackward ? QColor(204, 0, 0)
                        : k == Kind::kActivation ? QColor(52, 101, 164)
                                                 : QColor(117, 80, 123);
    return microbatch % 2 == 0 ? base : base.lighter(140);  // neighbours stay apart
  };
  for (std::size_t l = 0; l < gantt_.lanes.size(); ++l) {
    const double y = area.top() + static_cast<double>(l) * lane_h;
    if (l % 2 == 1) p.fillRect(QRectF(area.left(), y, area.width(), lane_h), QColor(245, 245, 245));
    p.setPen(Qt::black);
    p.drawText(QRectF(0, y, label_w - 6, lane_h), Qt::AlignRight | Qt::AlignVCenter,
               QString::fromStdString(gantt_.lanes[l]));
  }
  for (const GanttBar& b : gantt_.bars) {
    const bool transfer = b.kind == Kind::kActivation || b.kind == Kind::kGradient;
    const double y = area.top() + b.lane * lane_h;
    // Activations in the upper half of a link's lane, gradients in the lower one.
    const double top = transfer && b.kind == Kind::kGradient ? y + lane_h / 2 : y + 2;
    const double h = transfer ? lane_h / 2 - 2 : lane_h - 4;
    const QRectF r(area.left() + b.start_s * x_per_s, top, std::max(1.0, (b.end_s - b.start_s) * x_per_s), h);
    p.fillRect(r, color(b.kind, b.microbatch));
    if (r.width() > 14 && !transfer) {
      p.setPen(Qt::white);
      p.drawText(r, Qt::AlignCenter, QString::number(b.microbatch));
    }
  }
  p.setPen(Qt::gray);
  p.drawRect(area);
  p.setPen(Qt::black);
  // Time axis: five ticks.
  for (int k = 0; k <= 4; ++k) {
    const double t = gantt_.makespan_s * k / 4;
    const double x = area.left() + t * x_per_s;
    p.drawLine(QPointF(x, area.bottom()), QPointF(x, area.bottom() + 4));
    p.drawText(QRectF(x - 40, area.bottom() + 4, 80, 16), Qt::AlignCenter, QString::number(t, 'g', 3) + " s");
  }
  const std::pair<Kind, const char*> legend[] = {{Kind::kForward, "forward"}, {Kind::kBackward, "backward"},
                                                 {Kind::kActivation, "activation sent"},
                                                 {Kind::kGradient, "gradient sent back"}};
  double lx = area.left();
  for (const auto& [k, name] : legend) {
    p.fillRect(QRectF(lx, height() - 18, 12, 12), color(k, 0));
    p.drawText(QPointF(lx + 16, height() - 8), name);
    lx += 150;
  }
}

PipelineView::PipelineView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel;
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  layout->addWidget(summary_);
  gantt_ = new GanttView;
  layout->addWidget(gantt_, 3);
  energy_ = new QChartView;
  energy_->setRenderHint(QPainter::Antialiasing);
  layout->addWidget(energy_, 2);
}

void PipelineView::set_pipeline(Gantt gantt, const std::vector<Board>& boards, double link_j, QString summary) {
  gantt_->set_gantt(std::move(gantt), "one batch, micro-batch numbers on the bars");
  summary_->setText(summary);
  auto* chart = new QChart;
  chart->setTitle("energy per batch by board (J)");
  auto* above = new QBarSet("above idle");
  auto* idle = new QBarSet("idle through the batch");
  auto* links = new QBarSet("links (where published)");
  QStringList names;
  for (const Board& b : boards) {
    *above << b.compute_j;
    *idle << b.idle_j;
    *links << 0.0;
    names << b.name;
  }
  *above << 0.0;
  *idle << 0.0;
  *links << link_j;
  names << "links";
  auto* series = new QHorizontalStackedBarSeries;
  series->append(above);
  series->append(idle);
  series->append(links);
  chart->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(names);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  auto* x = new QValueAxis;
  x->setLabelFormat("%.3g");
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  QChart* old = energy_->chart();
  energy_->setChart(chart);
  delete old;  // released, not deleted, by setChart
}

}  // namespace ergon::gui
