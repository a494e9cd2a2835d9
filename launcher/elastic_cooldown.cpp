#include "launcher/elastic_cooldown.h"

#include <algorithm>
#include <cmath>

namespace dtrain {

double CooldownSeconds(double min_s, double max_s, int count, double u) {
  // 2^count overflows nothing that matters: past MAX it is clamped anyway.
  const double delay = min_s * std::ldexp(1.0, std::min(count, 62)) + u * min_s;
  return std::max(min_s, std::min(max_s, delay));
}

}  // namespace dtrain
