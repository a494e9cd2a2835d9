// Internal to the doctor: the whitespace trim and the count its parsers of tool output
// (nvidia-smi, the kernel log, sysfs counters, version strings) share.
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

namespace dtrain {

// `s` without leading and trailing whitespace.
inline std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The count `s` holds (1 to 18 decimal digits, nothing else), or -1: an error counter that reads
// "N/A", "-1" or "x7" is not a count, and is not judged.
inline long long CountOrMinusOne(std::string_view s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string_view::npos) {
    return -1;
  }
  return std::strtoll(std::string(s).c_str(), nullptr, 10);
}

}  // namespace dtrain
