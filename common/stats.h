#pragma once

// Order statistics over measurements, one definition for every figure Ergon reports.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ergon {

/// The nearest-rank q-quantile (0 < q <= 1): the smallest value with at least a fraction q of
/// the values at or below it. 0 for no values.
inline double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  const auto k = static_cast<std::ptrdiff_t>(std::clamp<std::size_t>(rank, 1, values.size()) - 1);
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[static_cast<std::size_t>(k)];
}

/// The middle value (the upper one of the two middles for an even count). 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

}  // namespace ergon
