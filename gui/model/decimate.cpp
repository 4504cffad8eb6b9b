#include "gui/model/decimate.h"

#include <algorithm>

namespace ergon::gui {

std::vector<Column> decimate(std::span<const double> x, std::span<const double> y, double x0, double x1,
                             std::size_t pixels) {
  std::vector<Column> out;
  if (pixels == 0 || !(x1 > x0) || x.empty()) return out;
  const auto begin = static_cast<std::size_t>(std::lower_bound(x.begin(), x.end(), x0) - x.begin());
  const auto end = static_cast<std::size_t>(std::lower_bound(x.begin(), x.end(), x1) - x.begin());
  const double scale = static_cast<double>(pixels) / (x1 - x0);
  out.reserve(std::min(pixels, end - begin));
  std::size_t i = begin;
  while (i < end) {
    const auto px = std::min(pixels - 1, static_cast<std::size_t>((x[i] - x0) * scale));
    // The column's right edge, computed as the column index is, so no sample falls between.
    Column c{i, 0, y[i], y[i], x[i], x[i]};
    for (; i < end && std::min(pixels - 1, static_cast<std::size_t>((x[i] - x0) * scale)) == px; ++i) {
      if (y[i] < c.min_y) c.min_y = y[i], c.min_x = x[i];
      if (y[i] > c.max_y) c.max_y = y[i], c.max_x = x[i];
      ++c.count;
    }
    out.push_back(c);
  }
  return out;
}

std::vector<Point> decimated_polyline(std::span<const double> x, std::span<const double> y, double x0,
                                      double x1, std::size_t pixels) {
  std::vector<Point> out;
  const auto columns = decimate(x, y, x0, x1, pixels);
  out.reserve(2 * columns.size() + 2);
  if (!columns.empty() && columns.front().first > 0) {
    const std::size_t k = columns.front().first - 1;
    out.push_back({x[k], y[k]});
  } else if (columns.empty()) {
    // Nothing inside: the two samples around the view still draw the line across it.
    const auto after = static_cast<std::size_t>(std::lower_bound(x.begin(), x.end(), x0) - x.begin());
    if (after > 0 && after < x.size()) {
      out.push_back({x[after - 1], y[after - 1]});
      out.push_back({x[after], y[after]});
    }
    return out;
  }
  for (const Column& c : columns) {
    const Point lo{c.min_x, c.min_y}, hi{c.max_x, c.max_y};
    if (lo == hi) {
      out.push_back(lo);
    } else if (c.min_x <= c.max_x) {
      out.push_back(lo);
      out.push_back(hi);
    } else {
      out.push_back(hi);
      out.push_back(lo);
    }
  }
  const std::size_t last = columns.back().first + columns.back().count;
  if (last < x.size()) out.push_back({x[last], y[last]});
  return out;
}

}  // namespace ergon::gui
