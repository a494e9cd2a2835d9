// The numbers of the PyTorch-trace summaries: the median as HTA's pandas takes it, a share in
// percent, and a figure rounded for --json.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace dtrain {

// The middle value, or the mean of the two middle values of an even count (0 for none), as pandas
// and numpy take it: HTA's figures are pandas medians, and the summary's match them.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  return (values[mid] + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

// `part` as a percentage of `whole` (0 when `whole` is not positive).
inline double Percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0;
}

// To 3 decimals, as --json prints times (ms to the µs, µs to the ns).
inline double Round3(double value) {
  return std::round(value * 1000.0) / 1000.0;
}

}  // namespace dtrain
