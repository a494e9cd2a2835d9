// The numbers of the PyTorch-trace summaries: the median and quantiles as HTA's pandas takes them,
// a share in percent, a figure rounded for --json, and which streams a per-stream table lists.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace dtrain {

// A per-stream table lists the streams with this share of their rank's total, at most
// kStreamsListed of them; --json has every stream.
constexpr double kListedShare = 0.05;
constexpr size_t kStreamsListed = 4;

// The entries of `items` whose `weight` is at least kListedShare of all of theirs, heaviest first
// (equal ones in their order), at most kStreamsListed.
template <class T, class Weight>
std::vector<const T*> ListedShares(const std::vector<T>& items, Weight weight) {
  double total = 0;
  for (const T& item : items) total += static_cast<double>(weight(item));
  std::vector<const T*> out;
  for (const T& item : items) {
    if (static_cast<double>(weight(item)) >= kListedShare * total) out.push_back(&item);
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](const T* a, const T* b) { return weight(*a) > weight(*b); });
  if (out.size() > kStreamsListed) out.resize(kStreamsListed);
  return out;
}

// The middle value, or the mean of the two middle values of an even count (0 for none), as pandas
// and numpy take it: HTA's figures are pandas medians, and the summary's match them.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  return (values[mid] + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

// The q-quantile (0 <= q <= 1) of `sorted` (ascending; 0 for none) as pandas' Series.quantile
// and numpy take it by default: linear between the two values around position q * (n - 1).
inline double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * (pos - static_cast<double>(lo));
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
