#include "gui/board_card.h"

#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "common/error.h"

namespace ergon::gui {
namespace {

constexpr int kWidth = 900;
constexpr int kHeight = 560;

/// A QApplication for the duration of the drawing, unless the process has one.
class OffscreenApp {
 public:
  OffscreenApp() {
    if (QApplication::instance() != nullptr) return;
    if (std::getenv("DISPLAY") == nullptr && std::getenv("WAYLAND_DISPLAY") == nullptr)
      ::setenv("QT_QPA_PLATFORM", "offscreen", 0);
    static int argc = 1;
    static char arg0[] = "ergon";
    static char* argv[] = {arg0, nullptr};
    owned_ = std::make_unique<QApplication>(argc, argv);
  }

 private:
  std::unique_ptr<QApplication> owned_;
};

std::filesystem::path save(QChart* chart, const std::filesystem::path& path) {
  QChartView view(chart);  // owns the chart
  view.setRenderHint(QPainter::Antialiasing);
  view.resize(kWidth, kHeight);
  chart->legend()->setAlignment(Qt::AlignRight);
  if (!view.grab().save(QString::fromStdString(path.string()))) throw Error("cannot write " + path.string());
  return path;
}

/// A log axis over [lo, hi] widened to whole decades.
QLogValueAxis* log_axis(const QString& title, double lo, double hi) {
  auto* axis = new QLogValueAxis;
  axis->setTitleText(title);
  axis->setBase(10);
  axis->setLabelFormat("%.0e");
  axis->setRange(std::pow(10, std::floor(std::log10(lo))), std::pow(10, std::ceil(std::log10(hi))));
  axis->setMinorTickCount(-1);
  return axis;
}

void attach(QChart* chart, QAbstractSeries* series, QAbstractAxis* x, QAbstractAxis* y) {
  chart->addSeries(series);
  series->attachAxis(x);
  series->attachAxis(y);
}

bool is_paging(const app::MeasuredShape& s) { return s.phase == "page-in" || s.phase == "page-out"; }

/// Points of one quantity per op kind, on log-log axes, with an optional line.
std::filesystem::path per_kind_plot(const app::ModeCharacterization& mode, const QString& title, const QString& y_title,
                                    double (*y_of)(const app::MeasuredShape&), const QLineSeries* fit_template,
                                    const std::filesystem::path& path) {
  auto* chart = new QChart;
  chart->setTitle(title);
  std::map<std::string, QScatterSeries*> by_kind;
  double x_lo = INFINITY, x_hi = 0, y_lo = INFINITY, y_hi = 0;
  for (const auto& s : mode.shapes) {
    if (is_paging(s) || s.flops == 0) continue;
    const double y = y_of(s);
    if (!(y > 0)) continue;
    auto*& series = by_kind[s.kind];
    if (!series) {
      series = new QScatterSeries;
      series->setName(QString::fromStdString(s.kind));
      series->setMarkerSize(8);
    }
    const double x = static_cast<double>(s.flops);
    series->append(x, y);
    x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
    y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
  }
  if (by_kind.empty()) {
    delete chart;
    return {};
  }
  auto* x_axis = log_axis("FLOPs per invocation", x_lo, x_hi);
  auto* y_axis = log_axis(y_title, y_lo, y_hi);
  chart->addAxis(x_axis, Qt::AlignBottom);
  chart->addAxis(y_axis, Qt::AlignLeft);
  for (auto& [kind, series] : by_kind) attach(chart, series, x_axis, y_axis);
  if (fit_template) {
    auto* fit = new QLineSeries;
    fit->setName(fit_template->name());
    fit->append(fit_template->points());
    attach(chart, fit, x_axis, y_axis);
  }
  return save(chart, path);
}

}  // namespace

std::vector<std::filesystem::path> render_board_card_plots(const app::CharacterizeResult& result,
                                                           const std::filesystem::path& dir) {
  OffscreenApp app;
  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> out;
  const app::ModeCharacterization& base = result.modes.front();

  // Time against FLOPs, with the compute-bound line of the fit: overhead + FLOPs / rate.
  {
    QLineSeries fit;
    fit.setName(QString::asprintf("fit: %.3g us + FLOPs / %.4g GFLOP/s", base.op_overhead_s * 1e6, base.flops_per_s / 1e9));
    double lo = INFINITY, hi = 0;
    for (const auto& s : base.shapes)
      if (!is_paging(s) && s.flops > 0) lo = std::min(lo, double(s.flops)), hi = std::max(hi, double(s.flops));
    for (int i = 0; i <= 40 && hi > 0 && base.flops_per_s > 0; ++i) {
      const double x = lo * std::pow(hi / lo, i / 40.0);
      fit.append(x, base.op_overhead_s + x / base.flops_per_s);
    }
    const auto p = per_kind_plot(base, QString::fromStdString("Time per invocation, mode " + base.mode), "seconds",
                                 [](const app::MeasuredShape& s) { return s.time_s; }, &fit, dir / "time_vs_flops.png");
    if (!p.empty()) out.push_back(p);
  }
  if (base.has_energy) {
    const auto p = per_kind_plot(
        base, QString::fromStdString("Energy per FLOP above idle, mode " + base.mode), "nJ per FLOP",
        [](const app::MeasuredShape& s) {
          return s.net_energy_j ? *s.net_energy_j / static_cast<double>(s.flops) * 1e9 : 0.0;
        },
        nullptr, dir / "energy_per_flop.png");
    if (!p.empty()) out.push_back(p);

    // Power by phase, per mode.
    auto* chart = new QChart;
    chart->setTitle("Board power by what it does (gross, W)");
    auto* bars = new QBarSeries;
    double top = 0;
    for (const auto& m : result.modes) {
      if (!m.has_energy) continue;
      auto* set = new QBarSet(QString::fromStdString(m.mode));
      for (double w : {m.idle_w, m.idle_w + m.compute_w, m.idle_w + m.memory_bound_w, m.idle_w + m.pagein_w,
                       m.idle_w + m.pageout_w}) {
        *set << w;
        top = std::max(top, w);
      }
      bars->append(set);
    }
    auto* x_axis = new QBarCategoryAxis;
    x_axis->append({"idle", "compute-bound", "memory-bound", "page-in", "page-out"});
    auto* y_axis = new QValueAxis;
    y_axis->setTitleText("watts");
    y_axis->setRange(0, top * 1.15);
    y_axis->applyNiceNumbers();
    chart->addAxis(x_axis, Qt::AlignBottom);
    chart->addAxis(y_axis, Qt::AlignLeft);
    attach(chart, bars, x_axis, y_axis);
    out.push_back(save(chart, dir / "power_by_phase.png"));
  }

  // Paging: time against bytes each way, with the fits (latency + bytes / rate).
  {
    auto* chart = new QChart;
    chart->setTitle(QString::fromStdString("Paging to " + (result.claimed.storage.empty() ? std::string("storage")
                                                                                          : result.claimed.storage) +
                                           ", mode " + base.mode));
    double x_lo = INFINITY, x_hi = 0, y_lo = INFINITY, y_hi = 0;
    std::map<std::string, QScatterSeries*> series;
    for (const auto& s : base.shapes) {
      if (!is_paging(s)) continue;
      auto*& ser = series[s.phase];
      if (!ser) {
        ser = new QScatterSeries;
        ser->setName(QString::fromStdString(s.phase));
        ser->setMarkerSize(9);
      }
      const double x = static_cast<double>(s.bytes);
      ser->append(x, s.time_s);
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x), y_lo = std::min(y_lo, s.time_s), y_hi = std::max(y_hi, s.time_s);
    }
    if (!series.empty()) {
      auto* x_axis = log_axis("bytes", x_lo, x_hi);
      auto* y_axis = log_axis("seconds", y_lo, y_hi);
      chart->addAxis(x_axis, Qt::AlignBottom);
      chart->addAxis(y_axis, Qt::AlignLeft);
      for (auto& [phase, ser] : series) attach(chart, ser, x_axis, y_axis);
      for (const bool in : {true, false}) {
        const double rate = in ? base.pagein_bytes_per_s : base.pageout_bytes_per_s;
        const double latency = in ? base.pagein_latency_s : base.pageout_latency_s;
        if (!(rate > 0)) continue;
        auto* fit = new QLineSeries;
        fit->setName(QString::asprintf("%s fit: %.3g ms + bytes / %.4g MB/s", in ? "page-in" : "page-out", latency * 1e3,
                                       rate / 1e6));
        for (int i = 0; i <= 20; ++i) {
          const double x = x_lo * std::pow(x_hi / x_lo, i / 20.0);
          fit->append(x, latency + x / rate);
        }
        attach(chart, fit, x_axis, y_axis);
      }
      out.push_back(save(chart, dir / "paging.png"));
    } else {
      delete chart;
    }
  }

  // The mode curve: what each mode computes against what it draws above idle.
  if (result.modes.size() > 1) {
    auto* chart = new QChart;
    chart->setTitle("Power modes: compute rate against power above idle (J per GFLOP: the whole board's)");
    auto* line = new QLineSeries;
    line->setName("modes");
    std::vector<QScatterSeries*> points;
    double x_hi = 0, y_hi = 0;
    for (const auto& m : result.modes) {
      const double x = m.flops_per_s / 1e9;
      const double y = m.has_energy ? m.compute_w : 0;
      line->append(x, y);
      auto* point = new QScatterSeries;
      point->setName(QString::asprintf("%s: %.3g GFLOP/s, %.3g W, %.3g J per GFLOP", m.mode.c_str(), x, y,
                                       m.has_energy ? (m.idle_w + m.compute_w) / x : 0.0));
      point->setMarkerSize(11);
      point->append(x, y);
      points.push_back(point);
      x_hi = std::max(x_hi, x), y_hi = std::max(y_hi, y);
    }
    auto* x_axis = new QValueAxis;
    x_axis->setTitleText("compute rate of one core (GFLOP/s)");
    x_axis->setRange(0, x_hi * 1.15);
    x_axis->applyNiceNumbers();
    auto* y_axis = new QValueAxis;
    y_axis->setTitleText("power above idle while compute-bound (W)");
    y_axis->setRange(0, std::max(y_hi, 1e-3) * 1.15);
    y_axis->applyNiceNumbers();
    chart->addAxis(x_axis, Qt::AlignBottom);
    chart->addAxis(y_axis, Qt::AlignLeft);
    attach(chart, line, x_axis, y_axis);
    for (auto* point : points) attach(chart, point, x_axis, y_axis);
    out.push_back(save(chart, dir / "modes.png"));
  }
  return out;
}

}  // namespace ergon::gui
