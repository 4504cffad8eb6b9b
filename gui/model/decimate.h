#pragma once

// Min/max decimation of a time series for a plot `pixels` wide: per pixel column, the
// samples' minimum and maximum (and where they occur), so that every spike and dip a
// column holds stays visible exactly, however many samples fall in it. Pure C++ (no Qt): the
// dashboard's series builders and their tests and benchmarks share it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ergon::gui {

struct Point {
  double x = 0;
  double y = 0;
  friend bool operator==(const Point&, const Point&) = default;
};

/// One pixel column's extremes: the first and last sample's x bound the column's samples.
struct Column {
  std::size_t first = 0, count = 0;  ///< samples [first, first + count)
  double min_y = 0, max_y = 0;
  double min_x = 0, max_x = 0;       ///< where the minimum and maximum are
};

/// Columns of [x0, x1) split into `pixels` equal columns over samples sorted by x (empty
/// columns are left out). O(samples in view) after two binary searches.
std::vector<Column> decimate(std::span<const double> x, std::span<const double> y, double x0,
                             double x1, std::size_t pixels);

/// The polyline to draw: per column its minimum and maximum in the order they occur (one
/// point when they are the same sample). At most 2 x pixels points, plus one sample on each
/// side of the view so the line enters and leaves it.
std::vector<Point> decimated_polyline(std::span<const double> x, std::span<const double> y, double x0,
                                      double x1, std::size_t pixels);

}  // namespace ergon::gui
