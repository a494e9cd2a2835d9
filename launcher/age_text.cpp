#include "launcher/age_text.h"

#include <algorithm>

#include <fmt/format.h>

namespace dtrain {

std::string AgeText(int64_t seconds) {
  const int64_t s = std::max<int64_t>(0, seconds);
  if (s < 120) return fmt::format("{} s", s);
  if (s < 2 * 3600) return fmt::format("{} min", s / 60);
  if (s < 2 * 86400) return fmt::format("{} h", s / 3600);
  return fmt::format("{} days", s / 86400);
}

}  // namespace dtrain
