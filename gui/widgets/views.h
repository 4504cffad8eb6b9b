#pragma once

// The dashboard's views: thin Qt Widgets / Qt Charts drawing what gui/model/views.h builds.

#include <QChartView>
#include <QWidget>
#include <functional>
#include <optional>
#include <vector>

#include "costdb/costs.h"
#include "costdb/plans.h"
#include "gui/model/views.h"

class QDoubleSpinBox;
class QLabel;
class QLineSeries;
class QTableWidget;
class QValueAxis;
class QAreaSeries;

namespace ergon::gui {

/// Memory budget (x) against energy (y), one series per planner, the front drawn as a line;
/// clicking a point calls `on_plan` with its plan id. A deadline control filters the plans.
class ParetoView : public QWidget {
 public:
  explicit ParetoView(QWidget* parent = nullptr);
  /// `basis` (by graph digest) lets the x axis be % of store-all's activations.
  void set_plans(std::vector<costdb::PlanRow> plans, std::map<std::string, MemoryBasis> basis = {});
  std::function<void(int64_t plan_id)> on_plan;
  /// The x axis's title and range as drawn last (for tests).
  [[nodiscard]] QString x_title() const { return x_title_; }
  [[nodiscard]] std::pair<double, double> x_range() const { return x_range_; }

 private:
  void rebuild();
  std::vector<costdb::PlanRow> plans_;
  std::map<std::string, MemoryBasis> basis_;
  QString x_title_;
  std::pair<double, double> x_range_;
  QChartView* view_;
  QDoubleSpinBox* deadline_;
  QLabel* note_;
};

/// The stage x node grid of one schedule (the POET paper's figure), painted cell by cell.
class ScheduleGridView : public QWidget {
 public:
  explicit ScheduleGridView(QWidget* parent = nullptr);
  void set_grid(ScheduleGrid grid, QString title);
  [[nodiscard]] QSize sizeHint() const override { return {520, 520}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  ScheduleGrid grid_;
  QString title_;
};

/// Two schedules side by side with their totals and the difference, and their memory over
/// the steps against the budget.
class ScheduleCompareView : public QWidget {
 public:
  explicit ScheduleCompareView(QWidget* parent = nullptr);
  struct Side {
    QString title;
    planner::TrainingGraph graph;
    planner::Schedule schedule;
    uint64_t budget_bytes = 0;
  };
  void set_schedules(const std::optional<Side>& left, const std::optional<Side>& right);

 private:
  ScheduleGridView* left_;
  ScheduleGridView* right_;
  QLabel* totals_;
  QChartView* memory_;
};

/// A run's power per rail, min/max-decimated to the view's width on every zoom and pan (drag
/// a range to zoom in, right-click to zoom out, arrow keys pan), with its op spans as bands.
class PowerView : public QWidget {
 public:
  explicit PowerView(QWidget* parent = nullptr);
  void set_trace(PowerTrace trace, QString title);
  /// Redecimates for the current range (called on range changes).
  void rebuild();
  [[nodiscard]] std::size_t points_drawn() const { return points_drawn_; }
  /// The samples of the trace shown (every rail), and how long it lasts.
  [[nodiscard]] std::size_t samples() const {
    std::size_t n = 0;
    for (const auto& [rail, xs] : trace_.t_s) n += xs.size();
    return n;
  }
  [[nodiscard]] double duration_s() const { return trace_.duration_s; }
  /// The legend's name of each rail shown: the board's ("VDD_IN", "5V"), else "rail N".
  [[nodiscard]] std::vector<std::string> rail_names() const {
    std::vector<std::string> names;
    for (const auto& [rail, xs] : trace_.t_s) {
      const auto it = trace_.rail_names.find(rail);
      names.push_back(it != trace_.rail_names.end() ? it->second : "rail " + std::to_string(rail));
    }
    return names;
  }

 private:
  PowerTrace trace_;
  QChartView* view_;
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
  bool rebuilding_ = false;
  std::size_t points_drawn_ = 0;
};

/// The attributed cost table of a database (with 1-sigma uncertainty), energy against FLOPs
/// per op kind, and each validated plan's predicted against measured energy.
class CostView : public QWidget {
 public:
  explicit CostView(QWidget* parent = nullptr);
  void set_costs(const std::vector<costdb::OpCostRow>& rows);
  void set_validations(const std::vector<costdb::ValidationRow>& rows);

 private:
  QTableWidget* table_;
  QChartView* scatter_;
  QChartView* validations_;
};

/// A pipeline's timeline: a lane per board and per link, a bar per forward, backward and
/// transfer, shaded by micro-batch, on one time axis (painted, like the schedule grid).
class GanttView : public QWidget {
 public:
  explicit GanttView(QWidget* parent = nullptr);
  void set_gantt(Gantt gantt, QString title);
  [[nodiscard]] QSize sizeHint() const override { return {900, 300}; }
  [[nodiscard]] std::size_t bars() const { return gantt_.bars.size(); }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  Gantt gantt_;
  QString title_;
};

/// One pipeline plan: its timeline, each board's energy per batch (above idle, and idle over
/// the batch), and the split in words.
class PipelineView : public QWidget {
 public:
  explicit PipelineView(QWidget* parent = nullptr);
  struct Board {
    QString name;
    double compute_j = 0, idle_j = 0;
  };
  void set_pipeline(Gantt gantt, const std::vector<Board>& boards, double link_j, QString summary);
  [[nodiscard]] const GanttView* gantt() const { return gantt_; }

 private:
  GanttView* gantt_;
  QChartView* energy_;
  QLabel* summary_;
};

}  // namespace ergon::gui
