// Count, total, mean, shortest, longest and standard deviation of durations seen one at a time
// (Welford's running mean and sum of squared deviations), and two such merged: what HTA's pandas
// aggregations (count, sum, mean, min, max, std) give for a group, without keeping its values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dtrain {

struct RunningStats {
  int64_t count = 0;
  double sum = 0, mean = 0, m2 = 0, min = 0, max = 0;

  void Add(double value) {
    min = count == 0 ? value : std::min(min, value);
    max = count == 0 ? value : std::max(max, value);
    ++count;
    sum += value;
    const double delta = value - mean;
    mean += delta / static_cast<double>(count);
    m2 += delta * (value - mean);
  }

  // As if every value of `other` had been added here (Chan et al.'s pairwise update).
  void Merge(const RunningStats& other) {
    if (other.count == 0) return;
    if (count == 0) {
      *this = other;
      return;
    }
    const double n = static_cast<double>(count), m = static_cast<double>(other.count);
    const double delta = other.mean - mean;
    m2 += other.m2 + delta * delta * n * m / (n + m);
    mean += delta * m / (n + m);
    count += other.count;
    sum += other.sum;
    min = std::min(min, other.min);
    max = std::max(max, other.max);
  }

  // The standard deviation of a sample (pandas' std), 0 for one value, as HTA reports it.
  double std_dev() const { return count > 1 ? std::sqrt(m2 / static_cast<double>(count - 1)) : 0; }
};

}  // namespace dtrain
