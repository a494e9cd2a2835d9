// The median as pandas and numpy take it: the middle value, or the mean of the two middle values
// of an even count (0 for none). HTA's figures are pandas medians, and the summary's match them.
#pragma once

#include <algorithm>
#include <vector>

namespace dtrain {

inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  return (values[mid] + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

}  // namespace dtrain
